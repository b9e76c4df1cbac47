"""The per-model tests `tileblend rewrite` adds to upstream main prove the blend only if their settings make the tiled
forward blend: for every class of `tileblend.upstream.test_cases.CASES`, its generated test class's `tiling_kwargs`
and `tiling_input_shape`, with the tester config of the snapshot, make the tiled forward blend overlapping tiles along
the height and the width, at least one blend covering a number of rows that is not a power of two (only such weights
are rounded, which tells the exact arithmetic from others).

The snapshot (`make upstream-snapshot`) is extracted and rewritten at test time; the generated test classes run in a
subprocess on the snapshot's diffusers, with the blends of the model recorded (`tileblend.calls`).
"""

import json
import os
import subprocess
import sys
import tarfile

import pytest

from tileblend.upstream.rewrite import apply_rewrite, plan_rewrite
from tileblend.upstream.test_cases import CASES
from tileblend.upstream.test_text import TEST_CLASS_SUFFIX


pytestmark = pytest.mark.slow  # starts a process that builds 11 models

# Run in the rewritten checkout: per model, the blends (method, rows blended) of its tiled forward.
RECORD = """
import importlib, json, pathlib, sys
import torch
from diffusers.models.autoencoders.vae import AutoencoderMixin
from tileblend.calls import record_blends

suffix, blends = sys.argv[1], {}
for model in sys.argv[2:]:
    name = f"Test{model}{suffix}"
    files = sorted(pathlib.Path("tests/models/autoencoders").glob("test_*.py"))
    path = next(path for path in files if f"class {name}(" in path.read_text())
    test = getattr(importlib.import_module(".".join(path.with_suffix("").parts)), name)()
    vae = test.get_tiled_model(test.model_class, torch.float32)
    with record_blends(AutoencoderMixin) as calls:  # the rewrite with --inherit leaves the blends to the mixin
        test.tiled_forward(vae, test.get_tiling_inputs(torch.float32))
    blends[model] = [(call.method, call.effective) for call in calls]
print(json.dumps(blends))
"""


@pytest.fixture(scope="module")
def blends(upstream_snapshot, tmp_path_factory) -> dict[str, list[tuple[str, int]]]:
    """Per class of `CASES`: the blends its generated test's tiled forward makes, on the rewritten snapshot."""
    work = tmp_path_factory.mktemp("snapshot")
    with tarfile.open(upstream_snapshot) as archive:
        archive.extractall(work, filter="data")
    checkout = work / "diffusers"
    apply_rewrite(plan_rewrite(checkout, inherit=True))
    env = os.environ | {"PYTHONPATH": f"{checkout / 'src'}{os.pathsep}{checkout}", "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-c", RECORD, TEST_CLASS_SUFFIX, *CASES],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return {model: [tuple(call) for call in calls] for model, calls in json.loads(run.stdout).items()}


@pytest.mark.parametrize("model", list(CASES))
def test_the_generated_settings_blend_overlapping_tiles(blends, model):
    blended = [(method, rows) for method, rows in blends[model] if rows > 0]
    assert len(blended) > 0, f"{model}: the tiled forward never blended"
    assert {"blend_v", "blend_h"} <= {method for method, _ in blended}, f"{model}: tiles must overlap on both axes"
    overlaps = sorted({rows for _, rows in blended})
    assert any(rows & (rows - 1) for rows in overlaps), f"{model}: every overlap is a power of two: {overlaps}"
