"""`make exact-vs-simple` (`tileblend.upstream.simple_blend`): the simple blend it measures, and the measurement."""

import json

import pytest
import torch

from tileblend import blend
from tileblend.upstream import simple_blend


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_simple_blend_equals_the_loop_at_power_of_two_overlaps_only(dtype):
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(2, 3, 40, 40, generator=generator).to(dtype) for _ in range(2))
    for extent in (8, 16, 32):
        assert torch.equal(simple_blend.simple_blend(a, b.clone(), extent, -2), blend.blend_v(a, b.clone(), extent))
    assert not torch.equal(simple_blend.simple_blend(a, b.clone(), 24, -2), blend.blend_v(a, b.clone(), 24))


def test_the_simple_blend_keeps_the_in_place_contract():
    a, b = torch.randn(1, 1, 8, 8), torch.randn(1, 1, 8, 8)
    assert simple_blend.simple_blend(a, b, 3, -1) is b
    before = b.clone()
    assert torch.equal(simple_blend.simple_blend(a, b, 0, -1), before)


def test_replayed_decoder_outputs_make_the_blend_the_only_difference():
    """The small SD-like preset tiles 384 pixels in 64-pixel tiles (overlap 16, a power of two): the simple and the
    exact decode agree; with 48-pixel tiles (overlap 12) they differ."""
    workload = simple_blend.WORKLOADS["small"]
    assert simple_blend.compare(workload, torch.float16)["changed_share"] == 0
    odd = simple_blend.Workload("small", (1, 4, 48, 48), 48, cast=False, title="small, 48-pixel tiles")
    result = simple_blend.compare(odd, torch.float16)
    assert 0 < result["changed_share"] < 1 and result["max_abs_difference"] > 0


def test_main_writes_the_table_and_its_json(tmp_path, capsys):
    path = tmp_path / "exact-vs-simple.json"
    assert simple_blend.main(["--workloads", "small", "--json", str(path)]) == 0
    data = json.loads(path.read_text())
    assert data["command"] == "python utils/exact_vs_simple.py --workloads small"
    assert [result["dtype"] for result in data["results"]] == ["float16", "bfloat16"]
    assert "| small SD-like VAE, 384x384 (tests) | float16 | float16 | 0 | 0.0% |" in capsys.readouterr().out


def test_main_refuses_an_unwritable_json_path_before_any_work(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        simple_blend.main(["--workloads", "small", "--json", str(tmp_path)])
    assert exit_info.value.code == 2 and "is a folder, not a file" in capsys.readouterr().err


def test_main_reports_a_json_write_that_fails_after_the_run_in_one_line(capsys):
    """/dev/full accepts the up-front check and fails the write: the table stays printed, one line, exit 2."""
    assert simple_blend.main(["--workloads", "small", "--json", "/dev/full"]) == 2
    captured = capsys.readouterr()
    assert "| small SD-like VAE, 384x384 (tests) | float16 |" in captured.out
    assert captured.err.endswith(
        "\nexact-vs-simple: error: cannot write /dev/full: No space left on device\n"
    )  # after tqdm
