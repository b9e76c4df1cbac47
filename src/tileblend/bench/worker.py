"""The worker side of the A/B process protocol (`tileblend.bench.protocol`): one process, one arm.

`python -m tileblend.bench.<benchmark> --arm A|B --config JSON --result PATH [--save PATH]` runs `worker_main` with the
benchmark's `build_workload`; the parent (`tileblend.bench.pairs`) reads the JSON result it writes.
"""

import argparse
import contextlib
import json
import resource
import sys
from pathlib import Path

import torch

from ..patch import autoencoder_classes, enable, find_loop_blends, is_enabled, wrapped_methods
from ..timing import median_ms, time_calls, timed


@contextlib.contextmanager
def timed_blends(found, device: torch.device):
    """Wrap the blend methods `found` (`PatchedMethod`s; loops or patched) in synchronised timers while the block runs.

    Yields:
        A dict whose `calls` and `seconds` grow with each blend call; the methods are restored on exit.
    """
    totals = {"calls": 0, "seconds": 0.0}

    def timer(cls, name, method):
        def timed_method(self, a, b, blend_extent):
            result, seconds = timed(lambda: method(self, a, b, blend_extent), device)
            totals["seconds"] += seconds
            totals["calls"] += 1
            return result

        return timed_method

    with wrapped_methods([(found_method.cls, found_method.method) for found_method in found], timer):
        yield totals


def peak_memory_bytes(device: torch.device) -> tuple[int, str]:
    """This process's peak memory and what it measures: CUDA max allocated, or the peak RSS of the process."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device), "cuda max allocated"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (peak if sys.platform == "darwin" else peak * 1024), "process peak RSS"


def worker_arguments(
    description: str, save_help: str, argv: list[str] | None, save_required: bool = False
) -> argparse.Namespace:
    """Parse the options the parent passes a worker (`tileblend.bench.pairs.run_worker`): `--arm`, `--config`,
    `--result` and `--save`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--arm", choices=("A", "B"), required=True)
    parser.add_argument("--config", required=True, help="the benchmark config, as JSON")
    parser.add_argument("--result", required=True, help="where to write this worker's JSON result")
    parser.add_argument("--save", required=save_required, help=save_help)
    return parser.parse_args(argv)


def worker_main(build_workload, argv: list[str] | None = None) -> int:
    """Run one worker process: `build_workload(config)` returns a function whose call is the measured work.

    The function must return the output tensor; it is called under `torch.inference_mode()`.
    """
    args = worker_arguments(
        "One arm of a tileblend A/B benchmark (started by the parent).", "where to torch.save the output tensor", argv
    )
    config = json.loads(args.config)
    device = torch.device(config["device"])

    if config["threads"]:
        torch.set_num_threads(config["threads"])
    # Both arms import every diffusers autoencoder module before building (enable() must), so they differ only in
    # the blend methods.
    found, _ = find_loop_blends(autoencoder_classes())
    if args.arm == "B":
        enable()
    with torch.inference_mode():
        run = build_workload(config)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        samples = time_calls(run, device, repeats=config["reps"], warmup=config["warmup"])
        peak, peak_kind = peak_memory_bytes(device)
        with timed_blends(found, device) as blends:
            output, instrumented_s = timed(run, device)
    if args.save:
        torch.save(output.detach().cpu(), args.save)
    result = {
        "arm": args.arm,
        "tileblend_enabled": is_enabled(),
        "samples_ms": [sample * 1e3 for sample in samples],
        "median_ms": median_ms(samples),
        "peak_memory_bytes": peak,
        "peak_memory_kind": peak_kind,
        "blend_calls": blends["calls"],
        "blend_ms": blends["seconds"] * 1e3,
        "blend_share": blends["seconds"] / instrumented_s,
        "output_shape": list(output.shape),
    }
    Path(args.result).write_text(json.dumps(result), encoding="utf-8")
    return 0
