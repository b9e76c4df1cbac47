"""The scripts in examples/ run on a CPU at small sizes and do what they print."""

import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tileblend.blend


pytestmark = pytest.mark.slow  # starts processes: not in the fast tier (`-m 'not slow'`)


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_tiled_decode_example_matches_the_loops(monkeypatch, capsys):
    calls = []
    for name, vectorized in list(tileblend.blend.BLEND_FUNCTIONS.items()):

        def counting_blend(a, b, blend_extent, name=name, vectorized=vectorized):
            calls.append(name)
            return vectorized(a, b, blend_extent)

        monkeypatch.setitem(tileblend.blend.BLEND_FUNCTIONS, name, counting_blend)
    monkeypatch.setattr(sys, "argv", ["tiled_decode.py", "--size", "128", "--device", "cpu"])
    with pytest.raises(SystemExit) as exit:
        runpy.run_path(str(EXAMPLES / "tiled_decode.py"), run_name="__main__")

    assert exit.value.code == 0
    assert "bitwise equal to diffusers' loops: yes" in capsys.readouterr().out
    assert set(calls) == {"blend_v", "blend_h"}  # tileblend's blend_v and blend_h ran in the tiled decode


def test_tiled_decode_example_loads_a_checkpoint(tmp_path):
    """`--model PATH` decodes a saved checkpoint (a tiny one with 16 latent channels, like FLUX's VAE); 96 px in
    32-px tiles overlapping by 8 px: a grid of tiles whose seams the blends join."""
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    blocks = {"down_block_types": ["DownEncoderBlock2D"] * 3, "up_block_types": ["UpDecoderBlock2D"] * 3}
    config = {"block_out_channels": [8, 16, 16], "layers_per_block": 1, "norm_num_groups": 4, "sample_size": 32}
    AutoencoderKL(**blocks, **config, latent_channels=16).save_pretrained(tmp_path / "vae")
    command = [sys.executable, str(EXAMPLES / "tiled_decode.py"), "--model", str(tmp_path), "--subfolder", "vae"]
    completed = subprocess.run(command + ["--size", "96", "--device", "cpu"], capture_output=True, text=True)

    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "tiled decode (1, 16, 24, 24) -> (1, 3, 96, 96)" in completed.stdout
    assert "bitwise equal to diffusers' loops: yes" in completed.stdout


def test_pipeline_benchmark_example_runs_on_cpu(tmp_path):
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / "pipeline_benchmark.py"), "--small", "--size", "128", "--device", "cpu"]
        + ["--dtype", "float32", "--pairs", "1", "--reps", "1", "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "images bitwise equal: yes" in completed.stdout
    blend_calls = int(completed.stdout.split(" blend calls per call")[0].rsplit(" ", 1)[-1])
    assert blend_calls > 0
