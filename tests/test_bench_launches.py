"""`tileblend bench launches`: the blend geometry of real-size decodes (on the meta device) and the exact op counts the
launch-cost estimate multiplies out. Timings are only checked to be there: speed is not a unit-test matter."""

import json

import torch

from tileblend.bench import launches
from tileblend.cli import main as tileblend


def test_sd_1024_decode_makes_twelve_128_row_blends():
    """SD's 512-px tiles with overlap 0.25 on 1024x1024: 3x3 tiles, 6 vertical and 6 horizontal seams of 128 rows."""
    assert launches.blend_geometry(launches.WORKLOADS["sd-1024"]) == {("blend_v", 128): 6, ("blend_h", 128): 6}


def test_wan_decode_blends_every_spatial_seam_at_its_overlap():
    """Wan's 256-px tiles with a 192-px stride: 64-px seams. On 480x832 the latent is 60x104 (tiles at 0, 24, 48 rows
    and 0, 24, 48, 72, 96 columns), so 3x5 tiles: 10 vertical seams, 12 horizontal ones."""
    geometry = launches.blend_geometry(launches.Workload("wan", (480, 832), frames=5))
    assert geometry == {("blend_v", 64): 10, ("blend_h", 64): 12}


def test_dispatch_cost_counts_the_loops_seven_ops_per_row_and_times_their_spread():
    from diffusers import AutoencoderKL

    for method in ("blend_v", "blend_h"):
        cost = launches.dispatch_cost(vars(AutoencoderKL)[method], method, 128, 4, torch.float16, repeats=1)
        assert cost["loop_ops"] == 7 * 128
        assert cost["tileblend_ops"] <= 12
        assert 0 < cost["loop_min_ms"] <= cost["loop_ms"] <= cost["loop_max_ms"]
        assert 0 < cost["tileblend_min_ms"] <= cost["tileblend_ms"] <= cost["tileblend_max_ms"]


def test_launches_command_writes_the_estimate_and_the_published_check(tmp_path, capsys):
    record_path = tmp_path / "launches.json"
    assert (
        tileblend(["bench", "launches", "--workloads", "sd-1024", "--repeats", "1", "--json", str(record_path)]) == 0
    )
    record = json.loads(record_path.read_text())

    (result,) = record["results"]
    totals = result["totals"]
    assert result["vae"] == "AutoencoderKL" and result["size"] == [1024, 1024]
    assert totals["calls"] == 12 and totals["loop_ops"] == 12 * 7 * 128
    assert totals["tileblend_ops"] <= 12 * 12
    assert record["published_check"].startswith("diffusers#14722: 1128 -> 1009 ms for a 1024x1024 SD pipeline")
    assert (
        f"the {12 * 7 * 128 - totals['tileblend_ops']} ops the vectorized blend removes" in record["published_check"]
    )
    out = capsys.readouterr().out
    assert "| **sd-1024** | all | | 12 | 10752 |" in out and "not a GPU timing" in out
    assert f"fastest and at its slowest of 1 calls: loops {totals['loop_min_ms']:.1f}-" in out
    assert "machine load (1, 5, 15-minute averages) when it ended: " in out
    assert len(record["machine"]["load_average"]) == 3
