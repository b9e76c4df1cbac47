"""Tiled encode and decode of every registry model with whichever diffusers is importable; run by test_rewrite.py.

    python tests/rewrite_tiled_outputs.py OUT.pt

Saves {"diffusers_file": ..., "<model>/<path>": {"output", "calls", "rewritten"}} to OUT.pt for every runnable tiled
path of `tileblend.tiny_models`. `calls` counts the blend calls per method name (`tileblend.calls`), so a parity test can
prove the blends ran; `rewritten` says whether the class's blends are the rewritten ones (vectorized: `torch.arange`,
no row loop).
"""

import inspect
import sys

import diffusers
import torch

from tileblend.calls import record_blends
from tileblend.tiny_models import REGISTRY, build_model, make_input, missing_class, run_path


def tiled_outputs() -> dict:
    """Run every runnable tiled path of every registry model (whose class the installed diffusers has) in float32 on
    one thread, counting the blend calls."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    results = {"diffusers_file": diffusers.__file__}
    for entry in REGISTRY:
        if missing_class(entry):
            continue
        model = build_model(entry)
        cls = type(model)
        for path, spec in entry.paths().items():
            if not spec.runs:
                continue
            with record_blends(cls) as calls:
                output = run_path(model, entry, path, make_input(entry, path))
            rewritten = "torch.arange(blend_extent" in inspect.getsource(cls.blend_v)
            results[f"{entry.name}/{path}"] = {"output": output, "calls": calls.counts(), "rewritten": rewritten}
    torch.set_num_threads(threads)
    return results


if __name__ == "__main__":
    torch.save(tiled_outputs(), sys.argv[1])
