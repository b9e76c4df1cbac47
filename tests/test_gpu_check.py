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


def test_gpu_check_runs_end_to_end_on_the_cpu(tmp_path):
    """Every step runs and passes at tiny sizes (the CUDA tests are reported SKIPPED with their count), and the summary
    holds the decode table the PR draft pastes, with each row's weights named."""
    out = tmp_path / "gpu-check"
    command = [sys.executable, str(REPO / "utils" / "gpu_check.py"), "--device", "cpu", "--out", str(out)]
    completed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
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
    ]
    assert statuses["cuda-tests"].startswith("SKIPPED: ") and "need a CUDA device" in statuses["cuda-tests"]
    # The pull request's added tests ran in a rewritten copy of the snapshot (CI has it); their CUDA-graph cases skip on
    # a CPU.
    upstream = statuses.pop("upstream-tests")
    if (REPO.parent / "shared" / "upstream" / "diffusers-main.tar.gz").is_file():
        assert re.fullmatch(r"ok \(14 passed; 14 CUDA-graph tests skipped on the CPU\)", upstream)
    else:
        assert upstream == "SKIPPED: no --upstream checkout or tarball given"
    assert all(status == "ok" for name, status in statuses.items() if name != "cuda-tests"), statuses
    table = summary["decode_table"].splitlines()
    assert len(table) == 4  # header, rule, image, video
    assert "random-weight preset `small`" in table[2] and table[2].endswith("| yes |")
    assert "5 frames of 128x128 | random-weight preset `wan-small`" in table[3] and table[3].endswith("| yes |")
    assert summary["decode_table"] in (out / "summary.md").read_text()
