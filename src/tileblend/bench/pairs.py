"""The parent side of the A/B process protocol (`tileblend.bench.protocol`): start the workers in A B, B A order,
collect their results and compare their outputs (`run_arms`, which `tileblend bench compile` runs too), and summarise
the timed calls of `tileblend bench decode` and `pipeline` (`run_pairs`)."""

import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ..compare import bitwise_equal
from .records import ArmResult, WorkerConfig, read_result


ARM_NAMES = {"A": "A (diffusers loops)", "B": "B (tileblend)"}


def arm_order(pairs: int, arms: tuple[str, str] = ("A", "B")) -> list[tuple[int, str]]:
    """The (pair, arm) sequence of `pairs` pairs of runs of the two `arms`: A B, B A, A B, ..."""
    first, second = arms
    return [(pair, arm) for pair in range(pairs) for arm in ((first, second) if pair % 2 == 0 else (second, first))]


def paired_ratios(a: list[float], b: list[float]) -> list[float]:
    """The ratio a / b of each pair: the speedup of arm B over arm A, pair by pair."""
    return [first / second for first, second in zip(a, b)]


def format_bytes(count: int) -> str:
    """`count` bytes in GiB (two decimals) from 1 GiB up, else in whole MiB."""
    return f"{count / 2**30:.2f} GiB" if count >= 2**30 else f"{count / 2**20:.0f} MiB"


WORKER_START = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)"
)
"""`python -c` code that runs the worker module named by its first argument as `python -m` would, with SIGINT ignored
from the start: a terminal's Ctrl-C reaches the whole process group, and only the parent answers it (its
KeyboardInterrupt kills the worker, in `subprocess.run`), so the worker prints no traceback of its own."""


def worker_environment(**variables: str) -> dict[str, str]:
    """This process's environment with `variables` set and the folder holding this `tileblend` first on PYTHONPATH,
    so that a worker process imports the same code."""
    environment = dict(os.environ, **variables)
    package_root = str(Path(__file__).resolve().parents[2])
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, environment.get("PYTHONPATH")]))
    return environment


def run_worker(module: str, arm: str, config: WorkerConfig, result_path: Path, save_path: Path | None, result_type):
    """Start one worker process of `module` for `arm`, wait for it, and return its result, a `result_type`; raises
    RuntimeError if it fails."""
    command = [sys.executable, "-c", WORKER_START, module, "--arm", arm, "--config", config.to_json()]
    command += ["--result", str(result_path)]
    if save_path is not None:
        command += ["--save", str(save_path)]
    # Its stderr (progress, and an error's traceback) goes straight to ours.
    completed = subprocess.run(command, env=worker_environment(), stdout=subprocess.PIPE, text=True)
    if completed.returncode != 0:
        raise RuntimeError(
            f"worker for arm {arm} failed (exit {completed.returncode}; its error is above):\n{completed.stdout[-4000:]}"
        )
    return read_result(result_path, result_type)


@dataclass(frozen=True)
class ArmRuns:
    """The worker processes of one A/B run: the arms in the order they ran, each arm's results in that order, and
    whether the outputs of the first pair are bitwise equal."""

    order: list[str]
    results: dict[str, list]
    outputs_equal: bool


def run_arms(
    module: str,
    config: WorkerConfig,
    pairs: int,
    result_type,
    nothing_blended: str,
    progress: Callable[[int, int, str, object], None],
) -> ArmRuns:
    """Run `pairs` pairs of worker processes of `module` with `config` (A B, B A, ...), calling
    `progress(index, pair, arm, result)` after each; the first pair saves its outputs, which are compared.

    Each worker writes a `result_type` with a `blend_calls` field.

    Raises:
        RuntimeError: if a worker fails, or `nothing_blended` if an arm's call never reached a blend method (nothing
            to compare).
    """
    order = arm_order(pairs)
    results = {"A": [], "B": []}
    outputs = {}
    with tempfile.TemporaryDirectory(prefix="tileblend-bench-") as tmp:
        for index, (pair, arm) in enumerate(order):
            save = Path(tmp, f"output-{arm}.pt") if pair == 0 else None
            result = run_worker(module, arm, config, Path(tmp, f"result-{index}.json"), save, result_type)
            if result.blend_calls == 0:
                raise RuntimeError(nothing_blended)
            results[arm].append(result)
            progress(index, pair, arm, result)
            if save is not None:
                outputs[arm] = torch.load(save)
        outputs_equal = bitwise_equal(outputs["A"], outputs["B"])
    return ArmRuns(order=[arm for _, arm in order], results=results, outputs_equal=outputs_equal)


def run_pairs(module: str, config: WorkerConfig, pairs: int, progress=lambda line: print(line, flush=True)) -> dict:
    """Run the A/B protocol for `pairs` pairs of worker processes of `module` (`run_arms`; each writes an `ArmResult`),
    print one progress line per process with `progress`, and return the summary.

    Raises:
        RuntimeError: if a worker fails, or an arm's call never reached a blend method (nothing to compare).
    """

    def show_progress(index: int, pair: int, arm: str, result: ArmResult) -> None:
        progress(
            f"[{index + 1}/{2 * pairs}] pair {pair + 1} arm {arm}: median {result.median_ms:.1f} ms over "
            f"{len(result.samples_ms)} reps, peak {format_bytes(result.peak_memory_bytes)}, "
            f"{result.blend_calls} blend calls, {result.blend_share:.1%} of an instrumented call"
        )

    nothing_blended = "no blend method ran: the output fits in one tile; use a larger --size or a smaller --tile"
    runs = run_arms(module, config, pairs, ArmResult, nothing_blended, show_progress)
    speedups = paired_ratios(
        [result.median_ms for result in runs.results["A"]], [result.median_ms for result in runs.results["B"]]
    )
    arms = {arm: summarise_arm(results) for arm, results in runs.results.items()}
    return {
        "config": config.as_dict(),
        "pairs": pairs,
        "order": runs.order,
        "arms": arms,
        "speedup_bound": blend_bound(arms),
        "speedups": speedups,
        "speedup_min": min(speedups),
        "speedup_median": statistics.median(speedups),
        "speedup_max": max(speedups),
        "outputs_equal": runs.outputs_equal,
        "output_shape": runs.results["A"][0].output_shape,
    }


def blend_bound(arms: dict) -> float:
    """The speedup the blend alone can explain (Amdahl): arm A's median time over that time with A's blend time
    replaced by B's (each the median over processes of one instrumented call). A measured speedup beyond it is noise or
    a side effect, not the blend's."""
    a, b = arms["A"], arms["B"]
    return a["median_ms"] / max(a["median_ms"] - a["blend_ms"] + b["blend_ms"], 1e-9)


def summarise_arm(results: list[ArmResult]) -> dict:
    """One arm's entry of a `run_pairs` summary: its samples per process, median, min and max over all of them, the
    highest peak memory, and the medians of the blend time and share over processes."""
    samples = [sample for result in results for sample in result.samples_ms]
    return {
        "tileblend_enabled": [result.tileblend_enabled for result in results],
        "samples_ms": [result.samples_ms for result in results],
        "process_medians_ms": [result.median_ms for result in results],
        "median_ms": statistics.median(samples),
        "min_ms": min(samples),
        "max_ms": max(samples),
        "peak_memory_bytes": max(result.peak_memory_bytes for result in results),
        "peak_memory_kind": results[0].peak_memory_kind,
        "blend_calls": results[0].blend_calls,
        "blend_ms": statistics.median(result.blend_ms for result in results),
        "blend_share": statistics.median(result.blend_share for result in results),
    }
