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
- `cpu`: tiny random-weight models with small tiles, so that one tile's activations are small and the tiled decode's
  own bookkeeping is what shows: AutoencoderKL (4 levels of 4 channels, 128-px tiles, overlap 0.25) at 4096x4096 in
  float32 and bfloat16 and at 2048x2048, AutoencoderKLWan (base_dim 3, 64-px tiles, stride 48) at 9 frames of
  1024x1024, AutoencoderKLHunyuanVideo (spatial tiling only, 64-px tiles) at 9 frames of 512x512.
- `gpu`: an SD-v1-size AutoencoderKL at 4096x4096 in float32 with diffusers' default tiling (512-px tiles), and a
  Wan-2.1-size AutoencoderKLWan (its defaults) at 81 frames of 720x1280 in bfloat16 (256-px tiles, stride 192).

This module is also the worker: `python -m tileblend.bench.memory --arm A|B --config JSON --result PATH` (A: stock,
B: streamed).
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


PRESETS = {
    "cpu": (
        Case("kl-4096", "AutoencoderKL", KL_TINY, (1, 4, 512, 512)),
        Case("kl-4096-bf16", "AutoencoderKL", KL_TINY, (1, 4, 512, 512), dtype="bfloat16"),
        Case("kl-2048", "AutoencoderKL", KL_TINY, (1, 4, 256, 256)),
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


def build_model(case: Case, device: torch.device, seed: int):
    """The case's model with seeded random weights, in eval mode, with tiling on."""
    import diffusers

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
    tiled decode."""
    import tileblend

    case = CASES[config.workload["case"]]
    device = torch.device(config.device)
    if config.threads:
        torch.set_num_threads(config.threads)
    tileblend.enable()
    model = build_model(case, device, config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    latent = torch.randn(case.latent_shape, generator=generator).to(device, DTYPES[case.dtype])
    warm_up = latent[..., : latent.shape[-2] // 8 + 2, : latent.shape[-1] // 8 + 2].clone()
    meter = PeakMeter(device)
    with torch.inference_mode(), tileblend.streamed_decode(model) if arm == "B" else contextlib.nullcontext():
        model.decode(warm_up)
        del warm_up
        meter.start()
        began = time.perf_counter()
        output = model.decode(latent).sample
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


def run_case(case: Case, args: argparse.Namespace, progress) -> dict:
    """Measure `case` in `args.runs` fresh processes per arm, alternating A B, B A; return its row."""
    config = WorkerConfig(
        device=args.device,
        dtype=case.dtype,
        seed=args.seed,
        threads=args.threads,
        warmup=1,
        reps=1,
        workload={"case": case.name},
    )
    results = {"A": [], "B": []}
    variables = MALLOC_SETTINGS if torch.device(args.device).type == "cpu" else {}
    with tempfile.TemporaryDirectory(prefix="tileblend-bench-memory-") as folder:
        for run in range(args.runs):
            for arm in ("A", "B") if run % 2 == 0 else ("B", "A"):
                path = Path(folder, f"{arm}-{run}.json")
                command = [sys.executable, "-m", WORKER_MODULE, "--arm", arm, "--config", config.to_json()]
                completed = subprocess.run(
                    command + ["--result", str(path)],
                    env=worker_environment(**variables),
                    stdout=subprocess.PIPE,
                    text=True,
                )
                if completed.returncode != 0:
                    raise RuntimeError(f"the {ARMS[arm]} decode of {case.name} failed (exit {completed.returncode})")
                result = read_result(path, MemoryResult)
                results[arm].append(result)
                progress(
                    f"{case.name} run {run + 1}/{args.runs} {ARMS[arm]}: extra peak {format_bytes(result.peak_bytes)}"
                    f" ({result.peak_bytes / result.output_bytes:.2f}x the output), {result.wall_s:.1f} s"
                )
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
        peaks = [result.peak_bytes for result in results[arm]]
        walls = [result.wall_s for result in results[arm]]
        row |= {
            f"{name}_peak_bytes": int(statistics.median(peaks)),
            f"{name}_peak_min_bytes": min(peaks),
            f"{name}_peak_max_bytes": max(peaks),
            f"{name}_ratio": statistics.median(peaks) / first.output_bytes,
            f"{name}_wall_s": statistics.median(walls),
            f"{name}_wall_min_s": min(walls),
            f"{name}_wall_max_s": max(walls),
        }
    return row


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


def add_parser(subparsers) -> None:
    parser = add_benchmark_parser(
        subparsers, "memory", "peak memory of the stock vs the row-streamed tiled decode", __doc__, main
    )
    parser.add_argument(
        "--device", type=arguments.device, default=DEFAULT_DEVICE, help=f"cpu or cuda (default: {DEFAULT_DEVICE})"
    )
    parser.add_argument("--preset", choices=list(PRESETS), help="cases to run (default: gpu on cuda, else cpu)")
    parser.add_argument("--cases", nargs="+", choices=list(CASES), metavar="CASE", help="run these cases instead")
    parser.add_argument("--runs", type=arguments.positive_int, default=3, help="processes per arm (default: 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights and latents")
    parser.add_argument(
        "--threads", type=arguments.positive_int, default=1, help="torch CPU threads per worker (default: 1)"
    )
    parser.add_argument("--json", type=arguments.output_file, metavar="PATH", help="also write the rows as JSON")


def main(args: argparse.Namespace) -> int:
    """Print the table; exit 1 if a case's outputs differ or a worker fails (out of memory, for one)."""
    if args.device.startswith("cpu") and not Path("/proc/self/clear_refs").exists():
        print("tileblend bench memory: error: a CPU run reads Linux's /proc/self (use --device cuda)", file=sys.stderr)
        return 2
    preset = args.preset or ("gpu" if torch.device(args.device).type == "cuda" else "cpu")
    cases = [CASES[name] for name in args.cases] if args.cases else list(PRESETS[preset])
    try:
        rows = [run_case(case, args, lambda line: print(line, file=sys.stderr, flush=True)) for case in cases]
    except RuntimeError as error:  # a worker failed; its error is above
        print(f"tileblend bench memory: error: {error}", file=sys.stderr)
        return 1
    conditions = environment(args.device, args.threads)
    print(format_table(rows))
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
    different = [row["case"] for row in rows if not row["equal"]]
    if different:
        print("DIFFERENT: " + ", ".join(different), file=sys.stderr)
        return 1
    return 0


def worker(argv: list[str] | None = None) -> int:
    """The worker process: measure one arm of one case and write its `MemoryResult`."""
    parser = argparse.ArgumentParser(description="One decode of tileblend bench memory (started by the parent).")
    parser.add_argument("--arm", choices=list(ARMS), required=True)
    parser.add_argument("--config", type=WorkerConfig.from_json, required=True)
    parser.add_argument("--result", required=True)
    args = parser.parse_args(argv)
    write_result(args.result, measure(args.arm, args.config))
    return 0


if __name__ == "__main__":
    sys.exit(worker())
