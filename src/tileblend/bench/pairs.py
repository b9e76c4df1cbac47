"""The parent side of the A/B process protocol (`tileblend.bench.protocol`): start the workers in A B, B A order,
collect their results and compare their outputs."""

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from ..compare import bitwise_equal


ARM_NAMES = {"A": "A (diffusers loops)", "B": "B (tileblend)"}


def arm_order(pairs: int) -> list[tuple[int, str]]:
    """The (pair, arm) sequence of worker processes: A B, B A, A B, ... for `pairs` pairs."""
    return [(pair, arm) for pair in range(pairs) for arm in ("AB" if pair % 2 == 0 else "BA")]


def format_bytes(count: int) -> str:
    """`count` bytes in GiB (two decimals) from 1 GiB up, else in whole MiB."""
    return f"{count / 2**30:.2f} GiB" if count >= 2**30 else f"{count / 2**20:.0f} MiB"


def worker_environment(**variables: str) -> dict[str, str]:
    """This process's environment with `variables` set and the folder holding this `tileblend` first on PYTHONPATH,
    so that a worker process imports the same code."""
    environment = dict(os.environ, **variables)
    package_root = str(Path(__file__).resolve().parents[2])
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, environment.get("PYTHONPATH")]))
    return environment


def run_worker(module: str, arm: str, config: dict, result_path: Path, save_path: Path | None) -> dict:
    """Start one worker process for `arm`, wait for it, and return its JSON result; raises if it fails."""
    command = [sys.executable, "-m", module, "--arm", arm, "--config", json.dumps(config)]
    command += ["--result", str(result_path)]
    if save_path is not None:
        command += ["--save", str(save_path)]
    completed = subprocess.run(
        command, env=worker_environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if completed.returncode != 0:
        raise RuntimeError(f"worker for arm {arm} failed (exit {completed.returncode}):\n{completed.stdout[-4000:]}")
    return json.loads(result_path.read_text(encoding="utf-8"))


def run_pairs(module: str, config: dict, pairs: int, progress=lambda line: print(line, flush=True)) -> dict:
    """Run the A/B protocol for `pairs` pairs of worker processes of `module` and return the summary.

    Raises:
        RuntimeError: if a worker fails, or an arm's call never reached a blend method (nothing to compare).
    """
    order = arm_order(pairs)
    workers = {"A": [], "B": []}
    outputs = {}
    with tempfile.TemporaryDirectory(prefix="tileblend-bench-") as tmp:
        for index, (pair, arm) in enumerate(order):
            save = Path(tmp, f"output-{arm}.pt") if pair == 0 else None
            result = run_worker(module, arm, config, Path(tmp, f"result-{index}.json"), save)
            if result["blend_calls"] == 0:
                raise RuntimeError(
                    "no blend method ran: the output fits in one tile; use a larger --size or a smaller --tile"
                )
            workers[arm].append(result)
            progress(
                f"[{index + 1}/{len(order)}] pair {pair + 1} arm {arm}: median {result['median_ms']:.1f} ms over "
                f"{len(result['samples_ms'])} reps, peak {format_bytes(result['peak_memory_bytes'])}, "
                f"{result['blend_calls']} blend calls, {result['blend_share']:.1%} of an instrumented call"
            )
            if save is not None:
                outputs[arm] = torch.load(save)
        outputs_equal = bitwise_equal(outputs["A"], outputs["B"])

    speedups = [a["median_ms"] / b["median_ms"] for a, b in zip(workers["A"], workers["B"])]
    arms = {}
    for arm, results in workers.items():
        samples = [sample for result in results for sample in result["samples_ms"]]
        arms[arm] = {
            "tileblend_enabled": [result["tileblend_enabled"] for result in results],
            "samples_ms": [result["samples_ms"] for result in results],
            "process_medians_ms": [result["median_ms"] for result in results],
            "median_ms": statistics.median(samples),
            "min_ms": min(samples),
            "max_ms": max(samples),
            "peak_memory_bytes": max(result["peak_memory_bytes"] for result in results),
            "peak_memory_kind": results[0]["peak_memory_kind"],
            "blend_calls": results[0]["blend_calls"],
            "blend_ms": statistics.median(result["blend_ms"] for result in results),
            "blend_share": statistics.median(result["blend_share"] for result in results),
        }
    return {
        "config": config,
        "pairs": pairs,
        "order": [arm for _, arm in order],
        "arms": arms,
        "speedups": speedups,
        "speedup_min": min(speedups),
        "speedup_median": statistics.median(speedups),
        "speedup_max": max(speedups),
        "outputs_equal": outputs_equal,
        "output_shape": workers["A"][0]["output_shape"],
    }
