"""`tileblend bench parallel`: single-device tiled decode vs the same decode split over N processes.

Both arms decode the same seeded random latents with the same seeded random weights (the VAEs and presets of
`tileblend bench decode`) under `tileblend.enable()`. Arm "single" is one plain process calling `vae.decode`; arm
"parallel" is `torchrun --nproc-per-node N` calling `tileblend.parallel.decode` on a gloo (CPU) or NCCL (CUDA, one GPU
per rank) group. Each arm reports its median time, the peak memory of each process, and the parallel arm the bytes of
decoded tiles each rank sent and received; the outputs are compared bit for bit.

This module is also the worker: `python -m tileblend.bench.parallel --config JSON --out DIR`, alone or under torchrun.
"""

import argparse
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from .. import arguments
from ..blend import DTYPES
from ..compare import bitwise_equal
from ..timing import median_ms, timed
from . import decode
from .machine import environment
from .options import DEFAULT_DEVICE, add_benchmark_parser, add_run_options, parse_size, worker_config
from .pairs import format_bytes, worker_environment
from .records import ParallelArmResult, WorkerConfig, read_result, write_record, write_result
from .worker import peak_memory_bytes


WORKER_MODULE = "tileblend.bench.parallel"
RUN_OPTION_CHANGES = {
    "--reps": {"default": 3, "help": "timed decodes per arm (default: 3)"},
    "--warmup": {"help": "untimed decodes per arm first (default: 1)"},
    "--seed": {"help": "seed of the random weights and latents"},
    "--threads": {"default": 1, "help": "torch CPU threads per process (default: 1)"},
}
"""How the run options of `bench parallel` differ from `tileblend.bench.options.RUN_OPTIONS` (it has no --pairs)."""


def add_parser(subparsers) -> None:
    parser = add_benchmark_parser(
        subparsers,
        "parallel",
        "tiled VAE decode on one device vs split over N processes (tileblend.parallel, torchrun)",
        __doc__,
        main,
    )
    parser.add_argument("--preset", choices=list(decode.PRESETS), default="wan", help="workload (default: wan)")
    parser.add_argument(
        "--nproc", type=arguments.at_least_two, default=2, help="processes of the parallel arm (default: 2)"
    )
    parser.add_argument(
        "--size", type=parse_size, help="output size in pixels, N or HEIGHTxWIDTH (default: the preset's)"
    )
    parser.add_argument("--tile", type=arguments.positive_int, help="VAE tile size in pixels (default: the preset's)")
    parser.add_argument(
        "--frames", type=arguments.positive_int, help="frames of the clip, video presets only (default: the preset's)"
    )
    add_run_options(parser, f"cpu or cuda (default: {DEFAULT_DEVICE})", omit=("--pairs",), changes=RUN_OPTION_CHANGES)
    parser.add_argument("--timeout", type=float, default=3600, help="seconds an arm may run (default: 3600)")
    parser.add_argument(
        "--json", metavar="PATH", type=arguments.output_file, help="write the per-rank results and the summary as JSON"
    )


def main(args: argparse.Namespace) -> int:
    """Run both arms; returns 1 if their outputs differ, 2 on a usage error, 3 if an arm ran past --timeout, 130 on
    Ctrl-C (in both cases its processes, torchrun's ranks included, are killed)."""
    try:
        config = worker_config(args, decode.workload_config(args))
        decode.check_output_fits(config)
    except ValueError as error:
        print(f"tileblend bench parallel: {error}", file=sys.stderr)
        return 2
    workload = config.workload
    clip = f"{workload['frames']} frames of " if workload["frames"] else ""
    title = (
        f"tileblend bench parallel: random-weight preset {args.preset}, {clip}{workload['size'][0]}x"
        f"{workload['size'][1]}, {workload['tile']}-px tiles, {args.dtype} on {args.device}, {args.threads} thread(s) "
        "per process"
    )
    print(title, flush=True)
    with tempfile.TemporaryDirectory(prefix="tileblend-parallel-") as tmp:
        try:
            single = _run_arm(config, 1, Path(tmp, "single"), args.timeout)
            print(f"single: median {single[0].median_ms:.1f} ms", flush=True)
            ranks = _run_arm(config, args.nproc, Path(tmp, "parallel"), args.timeout)
        except ArmTimeout as error:
            print(f"tileblend bench parallel: {error}", file=sys.stderr)
            return 3
        except KeyboardInterrupt:
            print(
                "tileblend bench parallel: interrupted; its processes were stopped, nothing written", file=sys.stderr
            )
            return 130
        outputs_equal = bitwise_equal(
            torch.load(Path(tmp, "single", "output.pt")), torch.load(Path(tmp, "parallel", "output.pt"))
        )
    summary = {
        "single_median_ms": single[0].median_ms,
        "parallel_median_ms": max(rank.median_ms for rank in ranks),
        "outputs_equal": outputs_equal,
    }
    summary["speedup"] = summary["single_median_ms"] / summary["parallel_median_ms"]
    print(format_summary(single[0], ranks, summary))
    if not outputs_equal:
        print("MISMATCH: single-device and parallel outputs differ", file=sys.stderr)
    if args.json:
        results = {"single": dataclasses.asdict(single[0]), "ranks": [dataclasses.asdict(rank) for rank in ranks]}
        record = {"benchmark": "parallel", "title": title, "config": config.as_dict()} | results
        record |= environment(config.device, config.threads) | summary
        write_record(args.json, record)
    return 0 if outputs_equal else 1


def _kill_tree(pid: int) -> None:
    """SIGKILL the session of `pid` and every process descended from it (found in /proc on Linux)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    tree, pending = [], [pid]
    while pending:
        found = children.get(pending.pop(), [])
        tree += found
        pending += found
    os.killpg(pid, signal.SIGKILL)
    for descendant in tree:
        try:
            os.kill(descendant, signal.SIGKILL)
        except ProcessLookupError:
            pass


class ArmTimeout(Exception):
    """An arm ran past `--timeout`; its whole process tree was killed."""


def _run_arm(config: WorkerConfig, nproc: int, out: Path, timeout: float) -> list[ParallelArmResult]:
    """Start the worker (alone, or under torchrun for nproc > 1), wait, and return each rank's result."""
    out.mkdir(parents=True)
    worker = ["-m", WORKER_MODULE, "--config", config.to_json(), "--out", str(out)]
    if nproc > 1:
        launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]
        command = [sys.executable, *launcher, *worker]
    else:
        command = [sys.executable, *worker]
    env = worker_environment(OMP_NUM_THREADS=str(config.threads))
    # A session of its own, and on a timeout every descendant too (torchrun starts its ranks in sessions of theirs).
    # Ctrl-C is held while it starts: raised inside Popen, it would leave a running process that nothing can name.
    interrupted = []
    handler = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum))
    try:
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
    finally:
        signal.signal(signal.SIGINT, handler)
    try:
        if interrupted:
            signal.raise_signal(signal.SIGINT)  # as the handler held above would have taken it
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_tree(process.pid)
        process.communicate()
        raise ArmTimeout(f"the {nproc}-process arm ran past --timeout {timeout:g} s; it and its ranks were killed")
    except KeyboardInterrupt:  # its session does not get the terminal's Ctrl-C: stop it and its ranks here
        _kill_tree(process.pid)
        process.communicate()
        raise
    if process.returncode != 0:
        raise RuntimeError(f"the {nproc}-process arm failed (exit {process.returncode}):\n{output[-4000:]}")
    return [read_result(Path(out, f"rank{rank}.json"), ParallelArmResult) for rank in range(nproc)]


def format_summary(single: ParallelArmResult, ranks: list[ParallelArmResult], summary: dict) -> str:
    """The table: one row for the single process, one per parallel rank, then speedup and bitwise equality."""
    header = f"{'process':<14} {'median ms':>10} {'tiles':>7} {'sent':>12} {'received':>12} {'peak memory':>12}"
    lines = ["", header, "-" * len(header)]
    lines.append(
        f"{'single':<14} {single.median_ms:>10.1f} {single.tiles:>7} {'-':>12} {'-':>12} "
        f"{format_bytes(single.peak_memory_bytes):>12}"
    )
    for rank, result in enumerate(ranks):
        report = result.report
        lines.append(
            f"{'rank ' + str(rank):<14} {result.median_ms:>10.1f} {report['own_tiles']:>7} "
            f"{_bytes(report['sent']):>12} {_bytes(report['received']):>12} "
            f"{format_bytes(result.peak_memory_bytes):>12}"
        )
    lines.append(
        f"\nspeedup single/parallel (medians; parallel: slowest rank): {summary['speedup']:.3f}x on {len(ranks)} "
        f"processes"
    )
    lines.append(f"peak memory: {ranks[0].peak_memory_kind}; sent/received: bytes of decoded tiles per call")
    lines.append(f"outputs bitwise equal: {'yes' if summary['outputs_equal'] else 'NO'}")
    return "\n".join(lines)


def _bytes(count: int) -> str:
    return f"{count / 2**20:.2f} MiB"


# Worker side.


def worker_main(argv: list[str] | None = None) -> int:
    import torch.distributed as dist

    import tileblend
    import tileblend.parallel

    parser = argparse.ArgumentParser(description="One process of `tileblend bench parallel` (started by it).")
    parser.add_argument("--config", type=WorkerConfig.from_json, required=True, help="the benchmark config, as JSON")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    config = args.config
    workload = config.workload
    torch.set_num_threads(config.threads)
    parallel = "WORLD_SIZE" in os.environ
    device = torch.device(config.device)
    if parallel and device.type == "cuda":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    if parallel:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank = dist.get_rank() if parallel else 0
    tileblend.enable()

    vae = decode.build_vae(workload["vae"], workload["tile"], device, DTYPES[config.dtype], config.seed)
    generator = torch.Generator().manual_seed(config.seed + 1)
    latents = torch.randn(decode.latent_shape(vae, workload["size"], workload["frames"]), generator=generator)
    latents = latents.to(device, DTYPES[config.dtype])
    report = {}  # the fields of the last call's `tileblend.parallel.ParallelTraffic` (none in the single arm)

    def run():
        if parallel:
            output, traffic = tileblend.parallel.decode(vae, latents, return_traffic=True)
            report.update(dataclasses.asdict(traffic))
            return output.sample
        return vae.decode(latents).sample

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    samples = []
    with torch.inference_mode():
        for index in range(config.warmup + config.reps):
            if parallel:
                dist.barrier()
            output, seconds = timed(run, device)
            if index >= config.warmup:
                samples.append(seconds)
    peak, peak_kind = peak_memory_bytes(device)
    if rank == 0:
        torch.save(output.detach().cpu(), Path(args.out, "output.pt"))
    result = ParallelArmResult(
        samples_ms=[sample * 1e3 for sample in samples],
        median_ms=median_ms(samples),
        peak_memory_bytes=peak,
        peak_memory_kind=peak_kind,
        report=report,
        tiles=report.get("tiles", "-"),
    )
    write_result(Path(args.out, f"rank{rank}.json"), result)
    if parallel:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(worker_main())
