"""`tileblend verify`: method-level and whole-model checks, model selection, JSON records and exit codes."""

import json

import diffusers
import pytest
import torch

from tileblend import cli, cuda_graph, patch
from tileblend.patch import autoencoder_classes, find_loop_blends
from tileblend.streamed.source import streamed_version
from tileblend.tiny_models import MODELS
from tileblend.verify import method_checks, model_checks, tables


@pytest.fixture
def no_method_checks(monkeypatch):
    """Skip the 44 method-level checks in CLI tests that are about the whole-model part."""
    monkeypatch.setattr(method_checks, "verify_methods", lambda device, dtypes, progress=True: [])


def broken_blend_v(a, b, blend_extent):
    """A blend that is wrong whenever it blends: it halves b's seam and ignores a."""
    n = min(a.shape[-2], b.shape[-2], blend_extent)
    if n > 0:
        b.narrow(-2, 0, n).mul_(0.5)
    return b


def test_verify_method_exact_for_a_patched_loop():
    found, _ = find_loop_blends(autoencoder_classes())
    patched = next(p for p in found if p.cls.__name__ == "AutoencoderKL" and p.method == "blend_h")
    result = method_checks.verify_method(patched, torch.float32, "cpu")
    assert result.exact and result.cases > 0


def test_select_entries_by_name_class_and_glob():
    assert [e.name for e in model_checks.select_entries(["kl"])] == ["kl"]
    assert [e.name for e in model_checks.select_entries(["AutoencoderKLWan"])] == ["wan"]
    assert {e.name for e in model_checks.select_entries(["ltx*"])} == {
        "ltx-video",
        "ltx2-video",
        "ltx2-diffusion-decoder",
    }
    assert [e.name for e in model_checks.select_entries(["kl", "k*"])] == ["kl", "kvae"]
    assert len(model_checks.select_entries(None)) == len(MODELS)
    with pytest.raises(ValueError, match="matches no model"):
        model_checks.select_entries(["no-such-model"])


def test_verify_models_exact_with_blend_counts():
    results = model_checks.verify_models([MODELS["kl"]], "cpu", [torch.float32], progress=False)
    assert [(r.path, r.dtype) for r in results] == [("encode", "float32"), ("decode", "float32")]
    for r in results:
        assert r.cls == "AutoencoderKL" and r.exact and r.blends_seen and r.ok
        assert r.blend_calls["blend_v"] > 0 and r.blend_calls["blend_h"] > 0
        assert r.same_calls and r.cuda_graph is None
    assert results[1].clipped


def test_a_class_the_installed_diffusers_lacks_is_skipped_with_the_reason():
    """An older diffusers lacks classes of the registry (0.36.0: AutoencoderKLKVAE, ...): their rows are skipped,
    naming the class and the release, and the run goes on."""
    import dataclasses

    import diffusers

    later = dataclasses.replace(MODELS["kl"], name="later", class_name="AutoencoderFromALaterRelease")
    results = model_checks.verify_models([later, MODELS["kl"]], "cpu", [torch.float32], progress=False)
    note = f"skipped: AutoencoderFromALaterRelease is not in diffusers {diffusers.__version__}"
    assert [(r.model, r.exact, r.note) for r in results[:2]] == [("later", None, note)] * 2
    assert all(r.exact for r in results[2:]) and len(results) == 4
    assert note in tables.format_model_table(results)


def test_model_table_has_no_timing_and_flags_changed_calls():
    result = model_checks.ModelResult(
        model="kl", cls="AutoencoderKL", path="decode", dtype="float32", exact=True, blends_seen=True, same_calls=False
    )
    table = tables.format_model_table([result])
    assert not result.ok and "BLEND CALLS DIFFER UNDER TILEBLEND" in table
    assert " ms" not in table


def test_method_table_shows_exactness_and_no_timing():
    found, _ = find_loop_blends(autoencoder_classes())
    patched = next(p for p in found if p.cls.__name__ == "AutoencoderKL" and p.method == "blend_v")
    result = method_checks.verify_method(patched, torch.float32, "cpu")
    table = tables.format_method_table([result])
    assert result.exact and result.cases > 20 and "AutoencoderKL" in table and " yes " in table
    assert " ms" not in table and "speedup" not in table


def test_verify_models_reports_upstream_bug_as_skipped():
    results = model_checks.verify_models([MODELS["hunyuanimage"]], "cpu", [torch.float32], progress=False)
    encode = next(r for r in results if r.path == "encode")
    assert encode.exact is None and "upstream bug" in encode.note and encode.ok


def test_cli_writes_json_and_table(tmp_path, capsys, no_method_checks):
    record_path = tmp_path / "verify.json"
    code = cli.main(["verify", "--device", "cpu", "--models", "kl", "--dtype", "float32", "--json", str(record_path)])
    assert code == 0
    records = json.loads(record_path.read_text())
    streamed = [r for r in records if r["check"] == "streamed"]
    # Streamed where this diffusers' AutoencoderKL.tiled_decode is the one tileblend streams (0.42.1); skipped, as
    # the stock decode runs, on other releases (the floor, 0.36.0, has another).
    exact = True if streamed_version(diffusers.AutoencoderKL.tiled_decode) is not None else None
    assert [(r["model"], r["dtype"], r["exact"], r["ok"]) for r in streamed] == [("kl", "float32", exact, True)]
    records = [r for r in records if r["check"] != "streamed"]
    assert [(r["model"], r["path"], r["dtype"]) for r in records] == [
        ("kl", "encode", "float32"),
        ("kl", "decode", "float32"),
    ]
    assert all(r["check"] == "model" and r["cls"] == "AutoencoderKL" and r["exact"] for r in records)
    assert all(r["blend_calls"]["blend_v"] > 0 and r["same_calls"] for r in records)
    assert not any("ms" in key for r in records for key in r)
    table = capsys.readouterr().out
    assert "blend calls" in table and "AutoencoderKL" not in table.split("blend calls")[0]
    assert "2 of 2 model/path/dtype runs exact" in table


def test_cli_exit_1_on_mismatch(monkeypatch, capsys, no_method_checks):
    monkeypatch.setitem(patch.BLEND_FUNCTIONS, "blend_v", broken_blend_v)
    code = cli.main(["verify", "--device", "cpu", "--models", "kl", "--dtype", "float32", "--no-progress"])
    assert code == 1
    captured = capsys.readouterr()
    assert "MISMATCH: kl encode (float32), kl decode (float32)" in captured.err
    assert " NO " in captured.out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--models", "no-such-model"], "matches no model"),
        (["--quick", "--models", "kl"], "drop --quick"),
    ],
)
def test_cli_exit_2_on_usage_error(argv, message, capsys):
    assert cli.main(["verify", *argv]) == 2
    assert message in capsys.readouterr().err


def test_cli_rejects_unknown_dtype():
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["verify", "--dtype", "int8"])
    assert exit_info.value.code == 2


@pytest.mark.cuda
def test_cuda_graph_replays_equal_eager_and_catch_a_stale_replay():
    def affine(x):
        return x * 3 + 1

    static_input = torch.zeros(64, device="cuda")
    new_inputs = [torch.randn(64, device="cuda") for _ in range(2)]
    graph, static_output = cuda_graph.capture(affine, static_input)
    assert cuda_graph.replays_equal_eager(graph, affine, static_input, static_output, new_inputs) == [True, True]

    calls = []

    def counted(x):  # a Python number read at capture time: frozen in the graph, so replays go stale
        calls.append(None)
        return x + len(calls)

    graph, static_output = cuda_graph.capture(counted, static_input)
    assert cuda_graph.replays_equal_eager(graph, counted, static_input, static_output, new_inputs) == [False, False]


@pytest.mark.cuda
def test_verify_models_replays_cuda_graphs():
    results = model_checks.verify_models([MODELS["kl"]], "cuda", [torch.float32], progress=False)
    assert [r.cuda_graph for r in results] == [True, True] and all(r.ok for r in results)


def test_models_help_says_the_method_checks_cover_every_method(capsys):
    """`verify --models kl` still checks all patched methods: its --help says so."""
    with pytest.raises(SystemExit):
        cli.main(["verify", "--help"])
    assert "the method checks always cover every patched method" in " ".join(capsys.readouterr().out.split())


def test_quick_shows_no_bar_for_the_models_it_skips(capfd):
    """`verify --quick` checks methods only: stderr has the methods' bar and no empty "tiny models" one."""
    assert cli.main(["verify", "--quick", "--device", "cpu", "--dtype", "float32"]) == 0
    err = capfd.readouterr().err
    assert "blend methods" in err and "tiny models" not in err
