"""The worker side of the A/B process protocol (`tileblend.bench.protocol`): one process, one arm.

`python -m tileblend.bench.<benchmark> --arm A|B --config JSON --result PATH [--save PATH]` runs `worker_main` with the
benchmark's `build_workload`; the parent (`tileblend.bench.pairs`) reads the `ArmResult` it writes.
"""

import argparse
import contextlib
import logging
import resource
import sys

import torch
from tqdm.auto import tqdm

from ..patch import autoencoder_classes, enable, find_loop_blends, is_enabled, wrapped_methods
from ..timing import median_ms, time_calls, timed
from .records import ArmResult, WorkerConfig, write_result


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


QUIET_LOGS = {
    "diffusers.models.modeling_utils": "that should be kept in float32: []. Casting directly",
    "transformers.utils.import_utils": "requires torchvision (not installed); falling back to",
}
"""Third-party log lines each worker process would repeat, by logger: diffusers' advice about modules kept in float32
when a model has none (every `.to(dtype)` of a preset VAE), and transformers' fallback of an image processor to PIL."""


def quiet_third_party_logs() -> None:
    """Drop the `QUIET_LOGS` lines in this process; the loggers' other lines pass."""
    for name, text in QUIET_LOGS.items():
        logging.getLogger(name).addFilter(lambda record, text=text: text not in record.getMessage())


def worker_arguments(description: str, save_help: str, argv: list[str] | None) -> argparse.Namespace:
    """Parse the options the parent passes a worker (`tileblend.bench.pairs.run_worker`): `--arm`, `--config` (read
    into a `WorkerConfig`), `--result` and `--save`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--arm", choices=("A", "B"), required=True)
    parser.add_argument("--config", type=WorkerConfig.from_json, required=True, help="the benchmark config, as JSON")
    parser.add_argument("--result", required=True, help="where to write this worker's JSON result")
    parser.add_argument("--save", help=save_help)
    return parser.parse_args(argv)


def start_arm(arm: str, config: WorkerConfig) -> list:
    """Set up this worker process for `arm` before it builds anything: the third-party log lines that every worker
    would repeat dropped (`quiet_third_party_logs`), torch's threads (`config.threads`), every diffusers autoencoder
    module imported, then tileblend enabled if `arm` is B; so that the arms differ only in the blend methods.

    Returns:
        The loop blends found (`tileblend.patch.find_loop_blends`), for `timed_blends`.
    """
    quiet_third_party_logs()
    if config.threads:
        torch.set_num_threads(config.threads)
    found, _ = find_loop_blends(autoencoder_classes())
    if arm == "B":
        enable()
    return found


def worker_main(build_workload, argv: list[str] | None = None) -> int:
    """Run one worker process: `build_workload(config)` (a `WorkerConfig`) returns a function whose call is the
    measured work.

    The function must return the output tensor; it is called under `torch.inference_mode()`.
    """
    args = worker_arguments(
        "One arm of a tileblend A/B benchmark (started by the parent).", "where to torch.save the output tensor", argv
    )
    config = args.config
    device = torch.device(config.device)
    found = start_arm(args.arm, config)
    # Progress on stderr, which the parent passes through: a real-size decode on a CPU takes minutes per call.
    bar = tqdm(
        total=config.warmup + config.reps + 1, desc=f"arm {args.arm}", unit="call", file=sys.stderr, leave=False
    )
    with torch.inference_mode():
        bar.set_postfix_str("building the model")
        workload = build_workload(config)
        bar.set_postfix_str("")

        def run():
            output = workload()
            bar.update()
            return output

        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        samples = time_calls(run, device, repeats=config.reps, warmup=config.warmup)
        peak, peak_kind = peak_memory_bytes(device)
        with timed_blends(found, device) as blends:
            output, instrumented_s = timed(run, device)
    bar.close()
    if args.save:
        torch.save(output.detach().cpu(), args.save)
    result = ArmResult(
        arm=args.arm,
        tileblend_enabled=is_enabled(),
        samples_ms=[sample * 1e3 for sample in samples],
        median_ms=median_ms(samples),
        peak_memory_bytes=peak,
        peak_memory_kind=peak_kind,
        blend_calls=blends["calls"],
        blend_ms=blends["seconds"] * 1e3,
        blend_share=blends["seconds"] / instrumented_s,
        output_shape=list(output.shape),
    )
    write_result(args.result, result)
    return 0
