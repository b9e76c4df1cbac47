"""The A/B process protocol shared by `tileblend bench decode` and `tileblend bench pipeline`.

Arm A runs diffusers as installed (the row loops); arm B runs the same code under `tileblend.enable()`. Each
measurement is a fresh Python process, so neither arm inherits the other's allocator, caches or warm kernels, and the
processes alternate A B, B A, A B, ... so that drift of the machine (clocks, other load) hits both arms alike.

A worker process (`tileblend.bench.worker`, started as
`python -m tileblend.bench.<benchmark> --arm A|B --config JSON --result PATH [--save PATH]`):

1. enables tileblend if its arm is B, and builds the workload from the config (same seed, so same weights and inputs);
2. calls it `warmup` times, then times `reps` calls between device synchronisations (`tileblend.timing.time_calls`);
3. reads its peak memory: `torch.cuda.max_memory_allocated` on CUDA, the process's peak RSS elsewhere;
4. makes one more, untimed, call with every blend method wrapped in a synchronised timer, which gives the blend calls,
   their time and their share of that call;
5. saves the output of that call with `torch.save` if asked (the first pair does), and writes its JSON result.

The parent (`tileblend.bench.pairs.run_pairs`) spawns the workers in order, prints one progress line per process,
compares the saved A and B outputs bit for bit (`tileblend.compare.bitwise_equal`) and summarises: per-arm medians,
paired speedups (the median of A over the median of B, per pair), peak memory and blend share.

This module holds the options of the A/B benchmarks and `run_benchmark`, which runs one, prints its table and writes
its JSON record (`tileblend.bench.records.write_record`) and plot (`tileblend.bench.plot`).
"""

import argparse
import sys

from .. import arguments
from ..output import writing
from .machine import environment
from .options import DEFAULT_DEVICE, add_run_options, parse_size
from .pairs import ARM_NAMES, format_bytes, run_pairs
from .plot import write_plot
from .records import WorkerConfig, write_record


NOISE_MARGIN = 1.02
"""A median speedup more than 2% outside what the blend's measured time explains (between no change and the bound of
`tileblend.bench.pairs.blend_bound`) is flagged as noise."""


def format_summary(title: str, summary: dict, load: tuple[float, float, float] | None = None) -> str:
    """The human-readable table of a `run_pairs` summary, with its spread, the machine's `load` (1, 5 and 15-minute
    load averages) and a verdict: one pair is not a result, and a speedup the blend cannot explain is noise."""
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
    if load is not None:
        lines.append(
            f"machine load (1, 5, 15-minute averages) when it ended: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}"
        )
    lines.append(f"outputs bitwise equal (first pair): {'yes' if summary['outputs_equal'] else 'NO'}")
    bound = summary["speedup_bound"]
    if summary["pairs"] < 2:
        lines.append("NOT A RESULT: one pair gives one ratio and no spread; run --pairs 3 or more")
    elif not min(1, bound) / NOISE_MARGIN <= summary["speedup_median"] <= max(1, bound) * NOISE_MARGIN:
        lines.append(
            f"NOISE: the median speedup {summary['speedup_median']:.3f}x is beyond what the blend's own time explains "
            f"({bound:.3f}x: arm A's median with its blend time replaced by arm B's); the excess is the machine's "
            "noise or a side effect, not the blend's speedup"
        )
    else:
        lines.append(f"the blend explains up to {bound:.3f}x (arm A's median with its blend time replaced by arm B's)")
    return "\n".join(lines)


def add_protocol_arguments(parser: argparse.ArgumentParser, presets, what: str) -> None:
    """The options every A/B benchmark takes: `--preset` (from `presets`; "sd" on CUDA, else "small"), `--size` and
    `--tile` of `what` (the benchmark's output, e.g. "image"), device, dtype, process pairs, repetitions, output files."""
    default_preset = "sd" if DEFAULT_DEVICE == "cuda" else "small"
    parser.add_argument(
        "--preset", choices=list(presets), default=default_preset, help=f"workload (default: {default_preset})"
    )
    parser.add_argument(
        "--size", type=parse_size, help=f"{what} size in pixels, N or HEIGHTxWIDTH (default: the preset's)"
    )
    parser.add_argument("--tile", type=arguments.positive_int, help="VAE tile size in pixels (default: the preset's)")
    add_run_options(parser, f"torch device (default: {DEFAULT_DEVICE})")
    parser.add_argument(
        "--json",
        metavar="PATH",
        type=arguments.output_file,
        help="write samples, medians, speedups and config as JSON",
    )
    parser.add_argument(
        "--plot",
        metavar="PATH",
        type=arguments.plot_file,
        help="write a PNG of the samples and speedups (needs matplotlib)",
    )


def run_benchmark(benchmark: str, module: str, title: str, config: WorkerConfig, args: argparse.Namespace) -> int:
    """Run the A/B pairs of worker `module`, print the table and the verdict, write --json and --plot; return 1 if the
    outputs differ."""
    print(
        f"{title}\n{args.pairs} pairs of processes (A B, B A, ...), {args.warmup} warmup + {args.reps} timed calls each"
    )
    summary = run_pairs(module, config, args.pairs)
    conditions = environment(config.device, config.threads)
    print()
    print(format_summary(title, summary, conditions["machine"]["load_average"]))
    record = {"benchmark": benchmark, "title": title, "command": command_line(benchmark, args)}
    record |= conditions | summary
    if not summary["outputs_equal"]:
        print("MISMATCH: arm A and arm B outputs differ", file=sys.stderr)
    if args.json:
        write_record(args.json, record)
    if args.plot:
        with writing(args.plot) as path:
            write_plot(path, title, summary)
    return 0 if summary["outputs_equal"] else 1


def command_line(benchmark: str, args: argparse.Namespace) -> str:
    """The `tileblend bench` command that reproduces this run (output paths included)."""
    words = ["tileblend", "bench", benchmark]
    for name, value in vars(args).items():
        if name in ("handler", "command", "benchmark") or value is None:
            continue
        words += [f"--{name.replace('_', '-')}", str(value)]
    return " ".join(words)
