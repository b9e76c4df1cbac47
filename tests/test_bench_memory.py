"""`tileblend bench memory`: what its CPU meter measures, its tables, its presets and options (the benchmark itself is
run by hand: its decodes take minutes)."""

import sys

import pytest
import torch

from tileblend import cli
from tileblend.bench.memory import PRESETS, PeakMeter, format_encode_table, format_table


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CPU meter reads Linux's /proc/self")
def test_cpu_meter_sees_a_freed_allocation_above_the_start():
    held = torch.ones(8 * 2**20)  # 32 MiB held before the block: not counted
    meter = PeakMeter(torch.device("cpu"))
    meter.start()
    transient = torch.ones(16 * 2**20)  # 64 MiB, written, then freed
    del transient
    peak = meter.peak()
    assert 60 * 2**20 <= peak < 90 * 2**20
    del held


def test_table_gives_ratios_to_the_output_and_equality():
    row = {
        "class": "AutoencoderKL",
        "dtype": "float32",
        "output_shape": [1, 3, 64, 64],
        "output_bytes": 2**20,
        "equal": True,
    }
    for name, peaks in (("stock", (4, 3, 5)), ("streamed", (1, 1, 2))):
        row |= {
            f"{name}_peak_bytes": peaks[0] * 2**20,
            f"{name}_peak_min_bytes": peaks[1] * 2**20,
            f"{name}_peak_max_bytes": peaks[2] * 2**20,
            f"{name}_ratio": float(peaks[0]),
            f"{name}_wall_s": 1.0,
        }
    line = format_table([row]).splitlines()[-1]
    assert "| 4.00x (3.00-5.00x, 4 MiB) | 1.00x (1.00-2.00x, 1 MiB) |" in line and line.endswith("| equal |")


def test_encode_table_gives_the_peak_as_a_multiple_of_the_input():
    row = {
        "class": "AutoencoderKL",
        "dtype": "float32",
        "input_bytes": 64 * 2**20,
        "moments_shape": [1, 8, 64, 64],
        "moments_bytes": 2 * 2**20,
        "stock_encode_ratio": 0.25,
        "stock_encode_peak_bytes": 16 * 2**20,
        "stock_encode_peak_min_bytes": 8 * 2**20,
        "stock_encode_peak_max_bytes": 32 * 2**20,
        "stock_encode_wall_s": 2.0,
    }
    line = format_encode_table([row]).splitlines()[-1]
    assert line == "| AutoencoderKL | float32 | 64 MiB | 1x8x64x64 (2 MiB) | 0.250x (0.125-0.500x, 16 MiB) | 2.0 |"


def test_presets_cover_kl_and_wan_on_both_devices():
    for preset in PRESETS.values():
        assert {"AutoencoderKL", "AutoencoderKLWan"} <= {case.class_name for case in preset}


def test_default_cpu_preset_has_the_4096_float32_kl_case_and_cpu_all_has_every_cpu_case():
    """The memory targets are stated for AutoencoderKL at 4096x4096 in float32 (latent 512x512) and for Wan."""
    (kl,) = [case for case in PRESETS["cpu"] if case.class_name == "AutoencoderKL"]
    assert kl.dtype == "float32" and kl.latent_shape[-2:] == (512, 512)
    assert {case.name for case in PRESETS["cpu"]} < {case.name for case in PRESETS["cpu-all"]}


def test_unknown_case_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(["bench", "memory", "--cases", "nope"])
    assert exit.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_encode_without_an_autoencoder_kl_case_is_one_line(capsys):
    assert cli.main(["bench", "memory", "--encode", "--cases", "wan-5x768"]) == 2
    assert capsys.readouterr().err == (
        "tileblend bench memory: error: --encode measures AutoencoderKL cases; none selected\n"
    )
