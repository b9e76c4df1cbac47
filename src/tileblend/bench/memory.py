"""`tileblend bench memory`: the peak memory of diffusers' tiled decode (stock) and of tileblend's row-streamed decode
(`tileblend.streamed`), per class, each decode in a fresh process.

A worker builds the model (seeded random weights, tiling on), decodes a small warm-up latent, then measures one decode
of the case's latent: its peak memory above what the process held just before it (on CUDA
`torch.cuda.max_memory_allocated` after `reset_peak_memory_stats`; on a CPU the peak resident set after the kernel's
peak was reset through `/proc/self/clear_refs`), its wall time, and a SHA-256 of the output's bytes. The output stays
alive, so the extra peak includes it: a ratio of 1.0x would be the output alone. Both arms run tileblend's vectorized
blends, so the arms differ in the walk only. CPU workers run with `MALLOC_MMAP_THRESHOLD_=131072`: glibc otherwise
adapts its threshold to the tiles and the stock decode's peak varies by a factor of two from run to run. Runs
alternate stock, streamed / streamed, stock; the table gives the median with min and max over the runs.

Presets:
- `cpu` (the default without CUDA; a few minutes on an idle 2-core machine): tiny random-weight models with small
  tiles, so that one tile's activations are small and the tiled decode's own bookkeeping is what shows:
  AutoencoderKL (4 levels of 4 channels, 128-px tiles, overlap 0.25) at 4096x4096 in float32, and AutoencoderKLWan
  (base_dim 3, 64-px tiles, stride 48) at 5 frames of 768x768.
- `cpu-all` (about half an hour): the `cpu` cases, AutoencoderKL at 4096x4096 in bfloat16 and at 2048x2048,
  AutoencoderKLWan at 9 frames of 1024x1024 and AutoencoderKLHunyuanVideo (spatial tiling only, 64-px tiles) at 9
  frames of 512x512.
- `gpu`: an SD-v1-size AutoencoderKL at 4096x4096 in float32 with diffusers' default tiling (512-px tiles), and a
  Wan-2.1-size AutoencoderKLWan (its defaults) at 81 frames of 720x1280 in bfloat16 (256-px tiles, stride 192).

`--encode` measures the stock tiled encode of the AutoencoderKL cases instead, the same way: an input of the decoded
size, encoded with tiling on; the encoded moments stay alive, and the table gives the extra peak as a multiple of the
input.

This module is also the worker: `python -m tileblend.bench.memory --arm A|B|E --config JSON --result PATH` (A: stock decode,
B: streamed decode, E: stock tiled encode).
"""

import argparse
import contextlib
import dataclasses
import datetime
import gc
import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from .. import arguments
from ..blend import DTYPES
from .machine import environment
from .options import DEFAULT_DEVICE, add_benchmark_parser
from .pairs import format_bytes, worker_environment
from .records import WorkerConfig, read_result, write_record, write_result


WORKER_MODULE = "tileblend.bench.memory"
ARMS = {"A": "stock", "B": "streamed"}
ENCODE_ARM = "E"
NAMES = {"A": "stock decode", "B": "streamed decode", ENCODE_ARM: "stock tiled encode"}
MALLOC_SETTINGS = {"MALLOC_MMAP_THRESHOLD_": "131072"}
"""Allocations of 128 KiB and more are mapped and unmapped one by one: the peak RSS no longer depends on how glibc's
adaptive threshold happened to move during the run."""

TINY_TILES = {
    "tile_sample_min_height": 64,
    "tile_sample_min_width": 64,
    "tile_sample_stride_height": 48,
    "tile_sample_stride_width": 48,
}
KL_TINY = {
    "block_out_channels": [4, 4, 4, 4],
    "norm_num_groups": 2,
    "latent_channels": 4,
    "layers_per_block": 1,
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "sample_size": 128,
}
WAN_TINY = {"base_dim": 3, "z_dim": 16, "dim_mult": [1, 1, 1, 1], "num_res_blocks": 1}
HUNYUAN_VIDEO_TINY = {
    "latent_channels": 4,
    "block_out_channels": (8, 8, 8, 8),
    "layers_per_block": 1,
    "norm_num_groups": 4,
}
SD_VAE = {
    "block_out_channels": [128, 256, 512, 512],
    "layers_per_block": 2,
    "latent_channels": 4,
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "sample_size": 512,
}


@dataclasses.dataclass(frozen=True)
class Case:
    """One decode: the diffusers class and its constructor arguments, `enable_tiling` arguments and attributes set
    after it, the latent's shape and the dtype."""

    name: str
    class_name: str
    init_kwargs: dict
    latent_shape: tuple[int, ...]
    dtype: str = "float32"
    tiling: dict = dataclasses.field(default_factory=dict)
    attributes: dict = dataclasses.field(default_factory=dict)


KL_4096 = Case("kl-4096", "AutoencoderKL", KL_TINY, (1, 4, 512, 512))
WAN_5X768 = Case("wan-5x768", "AutoencoderKLWan", WAN_TINY, (1, 16, 2, 96, 96), tiling=TINY_TILES)
PRESETS = {
    "cpu": (KL_4096, WAN_5X768),
    "cpu-all": (
        KL_4096,
        Case("kl-4096-bf16", "AutoencoderKL", KL_TINY, (1, 4, 512, 512), dtype="bfloat16"),
        Case("kl-2048", "AutoencoderKL", KL_TINY, (1, 4, 256, 256)),
        WAN_5X768,
        Case("wan-9x1024", "AutoencoderKLWan", WAN_TINY, (1, 16, 3, 128, 128), tiling=TINY_TILES),
        Case(
            "hunyuan-video-9x512",
            "AutoencoderKLHunyuanVideo",
            HUNYUAN_VIDEO_TINY,
            (1, 4, 3, 64, 64),
            tiling=TINY_TILES | {"tile_sample_min_num_frames": 64, "tile_sample_stride_num_frames": 48},
        ),
    ),
    "gpu": (
        Case("sd-4096", "AutoencoderKL", SD_VAE, (1, 4, 512, 512)),
        Case("wan2.1-81x720p", "AutoencoderKLWan", {}, (1, 16, 21, 90, 160), dtype="bfloat16"),
    ),
}
CASES = {case.name: case for cases in PRESETS.values() for case in cases}


@dataclasses.dataclass(frozen=True)
class MemoryResult:
    """What one worker measured: the extra peak over its decode and what that measures, the decode's wall time, the
    output's shape, bytes and SHA-256."""

    arm: str
    peak_bytes: int
    peak_kind: str
    wall_s: float
    output_shape: list[int]
    output_bytes: int
    output_sha256: str
    input_bytes: int = 0


def build_model(case: Case, device: torch.device, seed: int):
    """The case's model with seeded random weights, in eval mode, with tiling on."""
    import diffusers

    diffusers.utils.logging.set_verbosity_error()  # its advice on `.to(dtype)` would print in every run's process
    torch.manual_seed(seed)
    model = getattr(diffusers, case.class_name)(**case.init_kwargs).to(device, DTYPES[case.dtype]).eval()
    model.enable_tiling(**case.tiling)
    for attribute, value in case.attributes.items():
        setattr(model, attribute, value)
    return model


class PeakMeter:
    """The peak memory of a block above what the process held when it began: CUDA allocations on a CUDA device, the
    resident set (`VmHWM` after resetting it through `/proc/self/clear_refs`) on a CPU."""

    def __init__(self, device: torch.device):
        self.device = device
        self.kind = "cuda max allocated" if device.type == "cuda" else "peak RSS"

    def start(self) -> None:
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
        else:
            Path("/proc/self/clear_refs").write_text("5", encoding="ascii")
            self.base = _status_bytes("VmRSS")

    def peak(self) -> int:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return torch.cuda.max_memory_allocated(self.device) - self.base
        return _status_bytes("VmHWM") - self.base


def _status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(arm: str, config: WorkerConfig) -> MemoryResult:
    """Build the case of `config`, warm up, and measure one decode of its latent with the stock (A) or streamed (B)
    tiled decode, or (E, AutoencoderKL only) one stock tiled encode of an input of the decoded size, its output the
    encoded moments."""
    import tileblend

    case = CASES[config.workload["case"]]
    device = torch.device(config.device)
    if config.threads:
        torch.set_num_threads(config.threads)
    tileblend.enable()
    model = build_model(case, device, config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    latent = torch.randn(case.latent_shape, generator=generator).to(device, DTYPES[case.dtype])
    if arm == ENCODE_ARM:
        size, scale = model.tile_sample_min_size, model.tile_sample_min_size // model.tile_latent_min_size
        shape = (latent.shape[0], model.config.in_channels, latent.shape[2] * scale, latent.shape[3] * scale)
        del latent
        sample = torch.randn(shape, generator=generator).to(device, DTYPES[case.dtype])

        def encode(x):
            return model.encode(x).latent_dist.parameters

        result = _measure_call(arm, device, encode, sample, (size + 8, size + 8))  # a warm-up of 2 x 2 tiles
        return dataclasses.replace(result, input_bytes=sample.numel() * sample.element_size())
    corner = (latent.shape[-2] // 8 + 2, latent.shape[-1] // 8 + 2)
    with tileblend.streamed_decode(model) if arm == "B" else contextlib.nullcontext():
        return _measure_call(arm, device, lambda z: model.decode(z).sample, latent, corner)


def _measure_call(arm: str, device: torch.device, call, argument: torch.Tensor, corner: tuple[int, int]):
    """Call `call` on a copy of the top-left `corner` (height, width) of `argument` to warm up, then measure one call
    on `argument`: a `MemoryResult`."""
    meter = PeakMeter(device)
    with torch.inference_mode():
        warm_up = argument[..., : corner[0], : corner[1]].clone()
        call(warm_up)
        del warm_up
        meter.start()
        began = time.perf_counter()
        output = call(argument)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        wall_s = time.perf_counter() - began
        peak = meter.peak()
    data = output.detach().contiguous().cpu().view(torch.uint8).numpy()
    return MemoryResult(
        arm=arm,
        peak_bytes=peak,
        peak_kind=meter.kind,
        wall_s=wall_s,
        output_shape=list(output.shape),
        output_bytes=output.numel() * output.element_size(),
        output_sha256=hashlib.sha256(data).hexdigest(),
    )


def run_workers(case: Case, args: argparse.Namespace, arms: tuple[str, ...], progress) -> dict[str, list]:
    """The `MemoryResult`s of `case` for each of `arms`, `args.runs` fresh processes per arm, the order of the arms
    reversed every other run."""
    config = WorkerConfig(
        device=args.device,
        dtype=case.dtype,
        seed=args.seed,
        threads=args.threads,
        warmup=1,
        reps=1,
        workload={"case": case.name},
    )
    results = {arm: [] for arm in arms}
    variables = MALLOC_SETTINGS if torch.device(args.device).type == "cpu" else {}
    with tempfile.TemporaryDirectory(prefix="tileblend-bench-memory-") as folder:
        for run in range(args.runs):
            for arm in arms if run % 2 == 0 else arms[::-1]:
                path = Path(folder, f"{arm}-{run}.json")
                command = [sys.executable, "-m", WORKER_MODULE, "--arm", arm, "--config", config.to_json()]
                completed = subprocess.run(
                    command + ["--result", str(path)],
                    env=worker_environment(**variables),
                    stdout=subprocess.PIPE,
                    text=True,
                )
                if completed.returncode != 0:
                    raise RuntimeError(f"the {NAMES[arm]} of {case.name} failed (exit {completed.returncode})")
                result = read_result(path, MemoryResult)
                results[arm].append(result)
                size, what = (result.input_bytes, "input") if arm == ENCODE_ARM else (result.output_bytes, "output")
                progress(
                    f"{case.name} run {run + 1}/{args.runs} {NAMES[arm]}: extra peak {format_bytes(result.peak_bytes)}"
                    f" ({result.peak_bytes / size:.2f}x the {what}), {result.wall_s:.1f} s"
                )
    return results


def _spread(name: str, results: list, size: int) -> dict:
    """The median, min and max of the peaks and wall times of `results`, keys prefixed with `name`; the ratio is the
    median peak over `size`."""
    peaks = [result.peak_bytes for result in results]
    walls = [result.wall_s for result in results]
    return {
        f"{name}_peak_bytes": int(statistics.median(peaks)),
        f"{name}_peak_min_bytes": min(peaks),
        f"{name}_peak_max_bytes": max(peaks),
        f"{name}_ratio": statistics.median(peaks) / size,
        f"{name}_wall_s": statistics.median(walls),
        f"{name}_wall_min_s": min(walls),
        f"{name}_wall_max_s": max(walls),
    }


def run_case(case: Case, args: argparse.Namespace, progress) -> dict:
    """Measure the stock and streamed decode of `case`, alternating A B, B A; return its row."""
    results = run_workers(case, args, tuple(ARMS), progress)
    first = results["A"][0]
    digests = {result.output_sha256 for arm in results.values() for result in arm}
    row = {
        "case": case.name,
        "class": case.class_name,
        "dtype": case.dtype,
        "output_shape": first.output_shape,
        "output_bytes": first.output_bytes,
        "peak_kind": first.peak_kind,
        "runs": args.runs,
        "equal": len(digests) == 1,
    }
    for arm, name in ARMS.items():
        row |= _spread(name, results[arm], first.output_bytes)
    return row


def run_encode_case(case: Case, args: argparse.Namespace, progress) -> dict:
    """Measure the stock tiled encode of `case` (an AutoencoderKL case); return its row: the extra peak as a multiple
    of the input, and the size of the encoded moments."""
    results = run_workers(case, args, (ENCODE_ARM,), progress)[ENCODE_ARM]
    first = results[0]
    return {
        "case": case.name,
        "class": case.class_name,
        "dtype": case.dtype,
        "input_bytes": first.input_bytes,
        "moments_shape": first.output_shape,
        "moments_bytes": first.output_bytes,
        "peak_kind": first.peak_kind,
        "runs": args.runs,
    } | _spread("stock_encode", results, first.input_bytes)


def format_table(rows: list[dict]) -> str:
    """The Markdown table of `rows`: extra peak as a multiple of the output (median, min-max), wall time, equality."""
    lines = [
        "| class | dtype | output | stock extra peak (min-max) | streamed extra peak (min-max) | stock wall s | "
        "streamed wall s | bits |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        output = row["output_bytes"]

        def peak(name):
            return (
                f"{row[f'{name}_ratio']:.2f}x ({row[f'{name}_peak_min_bytes'] / output:.2f}-"
                f"{row[f'{name}_peak_max_bytes'] / output:.2f}x, {format_bytes(row[f'{name}_peak_bytes'])})"
            )

        shape = "x".join(str(size) for size in row["output_shape"])
        lines.append(
            f"| {row['class']} | {row['dtype']} | {shape} ({format_bytes(output)}) | {peak('stock')} | "
            f"{peak('streamed')} | {row['stock_wall_s']:.1f} | {row['streamed_wall_s']:.1f} | "
            f"{'equal' if row['equal'] else 'DIFFERENT'} |"
        )
    return "\n".join(lines)


def format_encode_table(rows: list[dict]) -> str:
    """The Markdown table of the `--encode` rows: extra peak as a multiple of the input (median, min-max)."""
    lines = [
        "| class | dtype | input | encoded moments | stock tiled encode extra peak (min-max) | wall s |",
        "| --- | --- | --- | --- | ---: | ---: |",
    ]
    for row in rows:
        size = row["input_bytes"]
        lines.append(
            f"| {row['class']} | {row['dtype']} | {format_bytes(size)} | "
            f"{'x'.join(str(n) for n in row['moments_shape'])} ({format_bytes(row['moments_bytes'])}) | "
            f"{row['stock_encode_ratio']:.3f}x ({row['stock_encode_peak_min_bytes'] / size:.3f}-"
            f"{row['stock_encode_peak_max_bytes'] / size:.3f}x, {format_bytes(row['stock_encode_peak_bytes'])}) | "
            f"{row['stock_encode_wall_s']:.1f} |"
        )
    return "\n".join(lines)


def add_parser(subparsers) -> None:
    parser = add_benchmark_parser(
        subparsers, "memory", "peak memory of the stock vs the row-streamed tiled decode", __doc__, main
    )
    parser.add_argument(
        "--device", type=arguments.device, default=DEFAULT_DEVICE, help=f"cpu or cuda (default: {DEFAULT_DEVICE})"
    )
    parser.add_argument(
        "--preset",
        choices=list(PRESETS),
        help="cases to run (default: gpu on cuda, else cpu; cpu-all: every CPU case)",
    )
    parser.add_argument("--cases", nargs="+", choices=list(CASES), metavar="CASE", help="run these cases instead")
    parser.add_argument("--runs", type=arguments.positive_int, default=3, help="processes per arm (default: 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights and latents")
    parser.add_argument(
        "--threads", type=arguments.positive_int, default=1, help="torch CPU threads per worker (default: 1)"
    )
    parser.add_argument(
        "--encode",
        action="store_true",
        help="measure the stock tiled encode of the AutoencoderKL cases instead (an input of the decoded size)",
    )
    parser.add_argument("--json", type=arguments.output_file, metavar="PATH", help="also write the rows as JSON")


def main(args: argparse.Namespace) -> int:
    """Print the table; exit 1 if a case's decoded outputs differ or a worker fails (out of memory, for one)."""
    if args.device.startswith("cpu") and not Path("/proc/self/clear_refs").exists():
        print("tileblend bench memory: error: a CPU run reads Linux's /proc/self (use --device cuda)", file=sys.stderr)
        return 2
    preset = args.preset or ("gpu" if torch.device(args.device).type == "cuda" else "cpu")
    cases = [CASES[name] for name in args.cases] if args.cases else list(PRESETS[preset])
    if args.encode:
        cases = [case for case in cases if case.class_name == "AutoencoderKL"]
        if not cases:
            print(
                "tileblend bench memory: error: --encode measures AutoencoderKL cases; none selected", file=sys.stderr
            )
            return 2
    run = run_encode_case if args.encode else run_case
    try:
        rows = [run(case, args, lambda line: print(line, file=sys.stderr, flush=True)) for case in cases]
    except RuntimeError as error:  # a worker failed; its error is above
        print(f"tileblend bench memory: error: {error}", file=sys.stderr)
        return 1
    conditions = environment(args.device, args.threads)
    print(format_encode_table(rows) if args.encode else format_table(rows))
    load = conditions["machine"]["load_average"]
    print(
        f"\n{conditions['machine']['processor']}, {conditions['machine']['cpu_count']} CPUs, device {args.device}; "
        f"load (1, 5, 15 min) at the end: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}; "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
    )
    if args.json:
        record = {
            "command": " ".join(["tileblend", *sys.argv[1:]]),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "rows": rows,
        } | conditions
        write_record(args.json, record)
    different = [row["case"] for row in rows if not row.get("equal", True)]
    if different:
        print("DIFFERENT: " + ", ".join(different), file=sys.stderr)
        return 1
    return 0


def worker(argv: list[str] | None = None) -> int:
    """The worker process: measure one arm of one case and write its `MemoryResult`."""
    parser = argparse.ArgumentParser(description="One decode of tileblend bench memory (started by the parent).")
    parser.add_argument("--arm", choices=[*ARMS, ENCODE_ARM], required=True)
    parser.add_argument("--config", type=WorkerConfig.from_json, required=True)
    parser.add_argument("--result", required=True)
    args = parser.parse_args(argv)
    write_result(args.result, measure(args.arm, args.config))
    return 0


if __name__ == "__main__":
    sys.exit(worker())
