"""`make gpu-check` (`utils/gpu_check.py`): the step plan for CUDA, and the whole run end to end on the CPU at tiny
sizes, as a machine without a GPU (CI) runs it."""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest


pytestmark = pytest.mark.slow  # starts processes: not in the fast tier (`-m 'not slow'`)


REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gpu_check() -> ModuleType:
    """`utils/gpu_check.py`, a script that runs without tileblend installed, imported from its path."""
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "utils" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cuda_plan_benchmarks_an_image_and_a_video_vae_in_both_half_types(gpu_check):
    presets = gpu_check.decode_steps("cuda", {})
    assert list(presets) == [
        f"decode-{kind}-{dtype}" for kind in ("image", "video") for dtype in ("float16", "bfloat16")
    ]
    assert presets["decode-image-float16"][:4] == ["bench", "decode", "--preset", "sd"]
    assert presets["decode-video-bfloat16"][:4] == ["bench", "decode", "--preset", "wan"]
    models = gpu_check.parse_models(["image=stabilityai/sdxl-vae", "video=Wan-AI/Wan2.1-T2V-1.3B-Diffusers:vae"])
    checkpoints = gpu_check.decode_steps("cuda", models)
    assert checkpoints["decode-image-float16"][:4] == ["bench", "decode", "--model", "stabilityai/sdxl-vae"]
    video = checkpoints["decode-video-float16"]
    assert video[2:6] == ["--model", "Wan-AI/Wan2.1-T2V-1.3B-Diffusers", "--subfolder", "vae"]


@pytest.mark.parametrize("word", ["audio=x", "image=", "image"])
def test_models_must_name_a_kind_and_a_checkpoint(gpu_check, word):
    with pytest.raises(SystemExit, match="--models takes image=ID"):
        gpu_check.parse_models([word])


def test_gpu_check_runs_end_to_end_on_the_cpu(tmp_path, upstream_snapshot):
    """Every step runs and passes at tiny sizes (the CUDA tests are reported SKIPPED with their count), the summary
    holds the decode table with each row's weights named, and the PR's added tests and its benchmark script on main and
    on the branch run in copies of the snapshot."""
    out = tmp_path / "gpu-check"
    command = [sys.executable, str(REPO / "utils" / "gpu_check.py"), "--device", "cpu", "--out", str(out)]
    command += ["--upstream", str(upstream_snapshot)]
    completed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=3600)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]

    summary = json.loads((out / "summary.json").read_text())
    statuses = {step["name"]: step["status"] for step in summary["steps"]}
    assert list(statuses) == [
        "deps",
        "cuda-tests",
        "verify",
        "bench-blend",
        "decode-image-float32",
        "decode-video-float32",
        "bench-pipeline",
        "upstream-tests",
        "pr-benchmark",
    ]
    assert statuses["cuda-tests"].startswith("SKIPPED: ") and "need a CUDA device" in statuses["cuda-tests"]
    # The PR's added tests ran in the rewritten copy (their CUDA-graph cases skip on a CPU), and its benchmark script
    # gave identical outputs on main and on the branch.
    assert statuses["upstream-tests"] == "ok (35 passed; 33 skipped on the CPU: half precision and CUDA graphs)"
    assert statuses["pr-benchmark"] == "ok (outputs identical)"
    pr = summary["pr"]
    runs = pr["benchmark"]["runs"]
    assert (
        [line.split(":")[0] for line in runs["main"]]
        == ["tiled encode", "tiled decode"]
        == [line.split(":")[0] for line in runs["branch"]]
    )
    assert pr["benchmark"]["compare"] == ["latents: identical", "sample: identical"]
    # What ran is named: pytest's own summary and command, and the change (layout, version, fingerprint of the files
    # the rewrite changed, which `make upstream-pr` compares with its own rewrite of the same checkout).
    assert re.fullmatch(r"35 passed, 33 skipped, .* in [0-9.]+s( \(\d+:\d\d:\d\d\))?", pr["tests"]["pytest"]), pr[
        "tests"
    ]
    assert pr["tests"]["command"].startswith("pytest tests/models/autoencoders/test_models_")
    assert pr["change"]["layout"] == "copies" and pr["change"]["files"] == 32 and len(pr["change"]["digest"]) == 64
    assert summary["machine"]["torch"]
    assert all(status.startswith("ok") for name, status in statuses.items() if name != "cuda-tests"), statuses
    table = summary["decode_table"].splitlines()
    assert len(table) == 4  # header, rule, image, video
    assert "random-weight preset `small`" in table[2] and table[2].endswith("| yes |")
    assert "5 frames of 128x128 | random-weight preset `wan-small`" in table[3] and table[3].endswith("| yes |")
    assert summary["decode_table"] in (out / "summary.md").read_text()


def test_without_upstream_the_pr_steps_fail_on_cuda_and_skip_on_a_cpu(gpu_check):
    """On CUDA the PR's own tests and benchmark are what the run is for: without --upstream they fail, not skip."""
    assert [step.status for step in gpu_check.without_upstream("cuda")] == [
        "FAIL: no --upstream (UPSTREAM=) given"
    ] * 2
    assert [step.status for step in gpu_check.without_upstream("cpu")] == ["SKIPPED: no --upstream given"] * 2
