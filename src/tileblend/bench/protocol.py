"""The A/B process protocol shared by `tileblend bench decode` and `tileblend bench pipeline`.

Arm A runs diffusers as installed (the row loops); arm B runs the same code under `tileblend.enable()`. Each
measurement is a fresh Python process, so neither arm inherits the other's allocator, caches or warm kernels, and the
processes alternate A B, B A, A B, ... so that drift of the machine (clocks, other load) hits both arms alike.

A worker process (`python -m tileblend.bench.<benchmark> --arm A|B --config JSON --result PATH [--save PATH]`):

1. enables tileblend if its arm is B, and builds the workload from the config (same seed, so same weights and inputs);
2. calls it `warmup` times, then times `reps` calls between device synchronisations (`tileblend.timing.time_calls`);
3. reads its peak memory: `torch.cuda.max_memory_allocated` on CUDA, the process's peak RSS elsewhere;
4. makes one more, untimed, call with every blend method wrapped in a synchronised timer, which gives the blend calls,
   their time and their share of that call;
5. saves the output of that call with `torch.save` if asked (the first pair does), and writes its JSON result.

The parent (`run_pairs`) spawns the workers in order, prints one progress line per process, compares the saved A and
B outputs bit for bit (`tileblend.compare.bitwise_equal`) and summarises: per-arm medians, paired speedups (the
median of A over the median of B, per pair), peak memory and blend share.
"""

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from .. import __version__
from ..blend import DTYPES as BLEND_DTYPES
from ..compare import bitwise_equal
from ..patch import autoencoder_classes, enable, find_loop_blends, is_enabled
from ..timing import synchronize, time_calls


ARM_NAMES = {"A": "A (diffusers loops)", "B": "B (tileblend)"}
DTYPES = {name: BLEND_DTYPES[name] for name in ("float32", "float16", "bfloat16")}
"""The dtypes the end-to-end benchmarks run models in."""


def arm_order(pairs: int) -> list[tuple[int, str]]:
    """The (pair, arm) sequence of worker processes: A B, B A, A B, ... for `pairs` pairs."""
    return [(pair, arm) for pair in range(pairs) for arm in ("AB" if pair % 2 == 0 else "BA")]


# Worker side.


@contextlib.contextmanager
def timed_blends(found, device: torch.device):
    """Wrap the blend methods `found` (`PatchedMethod`s; loops or patched) in synchronised timers while the block runs.

    Yields:
        A dict whose `calls` and `seconds` grow with each blend call; the methods are restored on exit.
    """
    totals = {"calls": 0, "seconds": 0.0}

    def timed(method):
        def wrapper(self, a, b, blend_extent):
            synchronize(device)
            begin = time.perf_counter()
            result = method(self, a, b, blend_extent)
            synchronize(device)
            totals["seconds"] += time.perf_counter() - begin
            totals["calls"] += 1
            return result

        return wrapper

    saved = [
        (found_method.cls, found_method.method, vars(found_method.cls)[found_method.method]) for found_method in found
    ]
    try:
        for cls, name, method in saved:
            setattr(cls, name, timed(method))
        yield totals
    finally:
        for cls, name, method in saved:
            setattr(cls, name, method)


def peak_memory_bytes(device: torch.device) -> tuple[int, str]:
    """This process's peak memory and what it measures: CUDA max allocated, or the peak RSS of the process."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device), "cuda max allocated"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (peak if sys.platform == "darwin" else peak * 1024), "process peak RSS"


def worker_main(build_workload, argv: list[str] | None = None) -> int:
    """Run one worker process: `build_workload(config)` returns a function whose call is the measured work.

    The function must return the output tensor; it is called under `torch.inference_mode()`.
    """
    parser = argparse.ArgumentParser(description="One arm of a tileblend A/B benchmark (started by the parent).")
    parser.add_argument("--arm", choices=("A", "B"), required=True)
    parser.add_argument("--config", required=True, help="the benchmark config, as JSON")
    parser.add_argument("--result", required=True, help="where to write this worker's JSON result")
    parser.add_argument("--save", help="where to torch.save the output tensor")
    args = parser.parse_args(argv)
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
            synchronize(device)
            begin = time.perf_counter()
            output = run()
            synchronize(device)
            instrumented_s = time.perf_counter() - begin
    if args.save:
        torch.save(output.detach().cpu(), args.save)
    result = {
        "arm": args.arm,
        "tileblend_enabled": is_enabled(),
        "samples_ms": [sample * 1e3 for sample in samples],
        "median_ms": statistics.median(samples) * 1e3,
        "peak_memory_bytes": peak,
        "peak_memory_kind": peak_kind,
        "blend_calls": blends["calls"],
        "blend_ms": blends["seconds"] * 1e3,
        "blend_share": blends["seconds"] / instrumented_s,
        "output_shape": list(output.shape),
    }
    Path(args.result).write_text(json.dumps(result), encoding="utf-8")
    return 0


# Parent side.


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def run_worker(module: str, arm: str, config: dict, result_path: Path, save_path: Path | None) -> dict:
    """Start one worker process for `arm`, wait for it, and return its JSON result; raises if it fails."""
    command = [sys.executable, "-m", module, "--arm", arm, "--config", json.dumps(config)]
    command += ["--result", str(result_path)]
    if save_path is not None:
        command += ["--save", str(save_path)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_package_root(), env.get("PYTHONPATH")]))
    completed = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if completed.returncode != 0:
        raise RuntimeError(f"worker for arm {arm} failed (exit {completed.returncode}):\n{completed.stdout[-4000:]}")
    return json.loads(result_path.read_text(encoding="utf-8"))


def format_bytes(count: int) -> str:
    return f"{count / 2**30:.2f} GiB" if count >= 2**30 else f"{count / 2**20:.0f} MiB"


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


def cpu_name() -> str:
    """The CPU model (from /proc/cpuinfo on Linux), or what `platform` knows."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def environment(config: dict) -> dict:
    """Versions and machine of this run, for the JSON record and the results docs."""
    device = torch.device(config["device"])
    versions = {"python": platform.python_version(), "torch": torch.__version__, "tileblend": __version__}
    for package in ("diffusers", "transformers", "accelerate"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    machine = {"platform": platform.platform(), "processor": cpu_name(), "cpu_count": os.cpu_count()}
    if device.type == "cuda":
        versions["cuda"] = torch.version.cuda
        machine["device_name"] = torch.cuda.get_device_name(device)
    else:
        machine["device_name"] = f"CPU, torch threads per process: {config['threads'] or torch.get_num_threads()}"
    return {"versions": versions, "machine": machine}


def format_summary(title: str, summary: dict) -> str:
    """The human-readable table of a `run_pairs` summary."""
    header = (
        f"{'arm':<22} {'median ms':>10} {'min ms':>10} {'max ms':>10} {'peak memory':>12} {'blends':>7} "
        f"{'blend ms':>9} {'blend share':>12}"
    )
    lines = [title, header, "-" * len(header)]
    for arm, stats in summary["arms"].items():
        lines.append(
            f"{ARM_NAMES[arm]:<22} {stats['median_ms']:>10.1f} {stats['min_ms']:>10.1f} {stats['max_ms']:>10.1f} "
            f"{format_bytes(stats['peak_memory_bytes']):>12} {stats['blend_calls']:>7} {stats['blend_ms']:>9.2f} "
            f"{stats['blend_share']:>12.1%}"
        )
    speedups = " ".join(f"{speedup:.3f}x" for speedup in summary["speedups"])
    lines.append(
        f"\nspeedup A/B per pair: {speedups} (median {summary['speedup_median']:.3f}x, range "
        f"{summary['speedup_min']:.3f}x-{summary['speedup_max']:.3f}x)"
    )
    samples = sum(len(process) for process in summary["arms"]["A"]["samples_ms"])
    lines.append(
        f"median, min, max ms: over each arm's {samples} timed calls, from {summary['pairs']} "
        f"process{'es' if summary['pairs'] > 1 else ''}; "
        f"peak memory: {summary['arms']['A']['peak_memory_kind']}, highest process per arm"
    )
    per_arm = "a single sample per arm" if summary["pairs"] == 1 else f"median of {summary['pairs']} processes"
    lines.append(
        "blend ms and share: all blend calls of one instrumented call per process (synchronised timers), " + per_arm
    )
    lines.append(f"outputs bitwise equal (first pair): {'yes' if summary['outputs_equal'] else 'NO'}")
    return "\n".join(lines)


def write_plot(path: str, title: str, summary: dict) -> None:
    """Save a PNG with each arm's samples (box plot and points) and the paired speedups. Needs matplotlib."""
    try:
        import matplotlib
    except ImportError as error:
        raise RuntimeError("--plot needs matplotlib: pip install 'tileblend[bench]'") from error
    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, (times, speedups) = pyplot.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [3, 2]})
    labels = [ARM_NAMES[arm] for arm in summary["arms"]]
    samples = [[s for process in stats["samples_ms"] for s in process] for stats in summary["arms"].values()]
    times.boxplot(samples, tick_labels=labels, showfliers=False)
    for position, arm_samples in enumerate(samples, start=1):
        offsets = [position + 0.08 * ((k % 5) - 2) for k in range(len(arm_samples))]
        times.plot(offsets, arm_samples, "o", alpha=0.5, markersize=4)
    times.set_ylabel("ms per call")
    times.set_title("per-arm samples")
    pairs = list(range(1, len(summary["speedups"]) + 1))
    speedups.bar(pairs, summary["speedups"], color="tab:green")
    speedups.axhline(1.0, color="gray", linestyle="--")
    speedups.set_xticks(pairs)
    speedups.set_xlabel("pair")
    speedups.set_ylabel("speedup (A median / B median)")
    speedups.set_title("paired speedup")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)


def add_protocol_arguments(parser: argparse.ArgumentParser, presets, what: str) -> None:
    """The options every A/B benchmark takes: `--preset` (from `presets`; "sd" on CUDA, else "small"), `--size` and
    `--tile` of `what` (the benchmark's output, e.g. "image"), device, dtype, process pairs, repetitions, output files."""
    default_device = "cuda" if torch.cuda.is_available() else "cpu"
    default_preset = "sd" if default_device == "cuda" else "small"
    parser.add_argument(
        "--preset", choices=list(presets), default=default_preset, help=f"workload (default: {default_preset})"
    )
    parser.add_argument("--size", type=int, help=f"{what} height and width in pixels (default: the preset's)")
    parser.add_argument("--tile", type=int, help="VAE tile size in pixels (default: the preset's)")
    parser.add_argument("--device", default=default_device, help=f"torch device (default: {default_device})")
    parser.add_argument("--dtype", choices=list(DTYPES), default="float32", help="model and input dtype")
    parser.add_argument("--pairs", type=int, default=3, help="number of A/B process pairs (default: 3)")
    parser.add_argument("--reps", type=int, default=5, help="timed calls per process (default: 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed calls per process before timing (default: 1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights and inputs")
    parser.add_argument(
        "--threads", type=int, help="torch CPU threads per worker (default: torch's); 1 on a busy or shared machine"
    )
    parser.add_argument("--json", metavar="PATH", help="write samples, medians, speedups and config as JSON")
    parser.add_argument("--plot", metavar="PATH", help="write a PNG of the samples and speedups (needs matplotlib)")


def protocol_config(args: argparse.Namespace) -> dict:
    """The part of a worker config that `add_protocol_arguments` defines."""
    names = ("device", "dtype", "seed", "threads", "warmup", "reps")
    return {name: getattr(args, name) for name in names}


def report(benchmark: str, module: str, title: str, config: dict, args: argparse.Namespace) -> int:
    """Run the pairs, print the table, write --json and --plot; return 1 if the outputs differ."""
    if args.pairs < 1 or args.reps < 1 or args.warmup < 0:
        print("--pairs and --reps must be at least 1, --warmup at least 0", file=sys.stderr)
        return 2
    print(
        f"{title}\n{args.pairs} pairs of processes (A B, B A, ...), {args.warmup} warmup + {args.reps} timed calls each"
    )
    summary = run_pairs(module, config, args.pairs)
    print()
    print(format_summary(title, summary))
    record = {"benchmark": benchmark, "title": title, "command": command_line(benchmark, args)}
    record |= environment(config) | summary
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=2), encoding="utf-8")
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        write_plot(args.plot, title, summary)
    if not summary["outputs_equal"]:
        print("MISMATCH: arm A and arm B outputs differ", file=sys.stderr)
        return 1
    return 0


def command_line(benchmark: str, args: argparse.Namespace) -> str:
    """The `tileblend bench` command that reproduces this run (output paths included)."""
    words = ["tileblend", "bench", benchmark]
    for name, value in vars(args).items():
        if name in ("handler", "command", "benchmark") or value is None:
            continue
        words += [f"--{name.replace('_', '-')}", str(value)]
    return " ".join(words)
