"""`tileblend bench blend`: the seam blend alone, diffusers' row loop against `tileblend.blend`.

For each of `blend_v`, `blend_h` and `blend_t`, each dtype and each extent, both arms blend the same pair of tiles in
one process: a warm-up call of each, then up to `--repeats` timed calls of each arm (`tileblend.timing.time_calls`),
alternated call by call in the order A B, B A, A B, ... so that drifting machine load hits both alike, for at most
`--budget` seconds per row (at least 5 calls each). Each row reports the median of each arm, the speedup (the median
over the pairs of calls of loop time / vectorized time: the two calls of a pair share the machine's load of their
moment) and the aten operators one call dispatches (`tileblend.opcount`). Before timing, each row checks that both
arms give the same bits (`tileblend.compare.bitwise_equal`).

Two sets of seams (`--seams`):

- `sd`: `blend_v` and `blend_h` on SD-sized decode tiles, (1, 3, 512, 512), at every extent of `--extents`; extent 128
  on them is the seam of a 1024x1024 Stable Diffusion tiled decode (rows marked * in the table). `blend_t` on 512
  frames of 32x32, (1, 3, 512, 32, 32), so that every extent up to 512 fits.
- `video`: the 5D seams of the video autoencoders at their default tile settings (`VIDEO_SEAMS`): latent tiles of a
  tiled encode, pixel tiles of a tiled decode and the temporal seams, whose rows hold tens of thousands to millions of
  elements.

Both arms blend in place into the same `b` on every call; a blend is a convex combination, so the values stay finite
and normal and every call does the same work. The summary names the worst speedup of the run.
"""

import argparse
import statistics
import time

import torch

from .. import arguments
from ..blend import BLEND_FUNCTIONS, DTYPE_NAMES, DTYPES
from ..compare import bitwise_equal
from ..opcount import count_aten_ops
from ..reference import REFERENCE_FUNCTIONS
from ..timing import median_ms, time_calls
from .machine import machine
from .options import add_benchmark_parser
from .pairs import arm_order, paired_ratios
from .records import write_record


METHODS = ("blend_v", "blend_h", "blend_t")
TILE_SHAPES = {"blend_v": (1, 3, 512, 512), "blend_h": (1, 3, 512, 512), "blend_t": (1, 3, 512, 32, 32)}
"""Tiles of the `sd` seams, per method."""
DEFAULT_EXTENTS = tuple(2**i for i in range(10))  # 1, 2, 4, ..., 512
SD_SEAM_EXTENT = 128
"""Blend extent of a 1024x1024 SD tiled decode: 512-pixel tiles overlapping by 25%."""
VIDEO_SEAMS = (
    # (name, methods, tile shape, extent): diffusers' default tile sizes and strides for each autoencoder.
    ("Wan encode", ("blend_v", "blend_h"), (1, 32, 21, 32, 32), 8),  # 81 frames; latent tiles 32, stride 24
    ("video latent", ("blend_v", "blend_h"), (1, 16, 21, 60, 104), 8),  # a whole 480x832, 81-frame Wan latent
    ("Wan decode", ("blend_v", "blend_h"), (1, 3, 81, 256, 256), 64),  # 81 frames; pixel tiles 256, stride 192
    ("HunyuanVideo decode", ("blend_v", "blend_h"), (1, 3, 17, 256, 256), 64),  # 17-frame chunk; 256, stride 192
    ("LTX decode", ("blend_v", "blend_h"), (1, 3, 17, 512, 512), 64),  # pixel tiles 512, stride 448
    ("HunyuanVideo frames", ("blend_t",), (1, 3, 17, 480, 848), 4),  # 480x848 frames; 16 frames, stride 12
    ("LTX frames", ("blend_t",), (1, 3, 17, 256, 256), 8),  # 16 frames, stride 8
    ("128-channel latent", ("blend_t",), (1, 128, 16, 120, 208), 4),  # LTX's latent width, 4 frames
)
"""The `video` seams: name, methods, tile shape and extent."""


def sd_extent(text: str) -> int:
    """A blend extent an SD tile can hold: 1 to its 512 rows (the blend clamps a larger one to the tile)."""
    extent = arguments.positive_int(text)
    if extent > TILE_SHAPES["blend_v"][-2]:
        raise argparse.ArgumentTypeError(
            f"{text!r} is larger than the {TILE_SHAPES['blend_v'][-2]} rows of an SD tile"
        )
    return extent


def machine_info(device: torch.device) -> dict:
    """Where the numbers come from (`tileblend.bench.machine`): platform, CPU (and GPU) name, torch threads, load
    average, torch and diffusers versions."""
    facts = machine(device)
    return {
        "platform": facts.platform,
        "cpu": facts.processor,
        "cpu_threads": facts.torch_threads,
        "gpu": facts.gpu,
        "device": str(device),
        "load_average": facts.load_average,
        "torch": facts.versions["torch"],
        "diffusers": facts.versions["diffusers"],
    }


def bench_row(
    seam: str,
    method: str,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    extent: int,
    device: torch.device,
    repeats: int,
    budget_s: float,
) -> dict:
    """Time both arms of one (seam, method, dtype, extent) row and count their aten operators."""
    loop, vectorized = REFERENCE_FUNCTIONS[method], BLEND_FUNCTIONS[method]
    generator = torch.Generator().manual_seed(extent)
    a = torch.randn(shape, generator=generator).to(device, dtype)
    b = torch.randn(shape, generator=generator).to(device, dtype)

    if not bitwise_equal(loop(a, b.clone(), extent), vectorized(a, b.clone(), extent)):
        raise AssertionError(f"{method} {dtype} extent {extent}: the vectorized blend differs from the loop")
    loop_ops = sum(count_aten_ops(loop, a, b, extent).values())
    vectorized_ops = sum(count_aten_ops(vectorized, a, b, extent).values())

    arms = {"loop": (lambda: loop(a, b, extent)), "vectorized": (lambda: vectorized(a, b, extent))}
    samples = {name: time_calls(function, device, repeats=0, warmup=1) for name, function in arms.items()}
    started = time.perf_counter()
    for _, name in arm_order(repeats, ("loop", "vectorized")):
        samples[name] += time_calls(arms[name], device, repeats=1, warmup=0)
        if len(samples["loop"]) == len(samples["vectorized"]) >= 5 and time.perf_counter() - started > budget_s:
            break
    loop_samples, vectorized_samples = samples["loop"], samples["vectorized"]
    loop_ms, vectorized_ms = median_ms(loop_samples), median_ms(vectorized_samples)
    return {
        "seam": seam,
        "method": method,
        "dtype": DTYPE_NAMES[dtype],
        "shape": list(shape),
        "extent": extent,
        "sd_seam": seam == "SD" and method != "blend_t" and extent == SD_SEAM_EXTENT,
        "loop_ms": loop_ms,
        "vectorized_ms": vectorized_ms,
        "speedup": statistics.median(paired_ratios(loop_samples, vectorized_samples)),
        "loop_ops": loop_ops,
        "vectorized_ops": vectorized_ops,
        "samples": [len(loop_samples), len(vectorized_samples)],
    }


def format_table(rows: list[dict]) -> str:
    """A Markdown table of `rows`, one line per (seam, method, dtype, extent); the SD-1024 seam rows are marked `*`."""
    lines = [
        "| seam | method | dtype | tile shape | extent | loop ms | vectorized ms | speedup | loop ops "
        "| vectorized ops |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        shape = "x".join(str(size) for size in row["shape"])
        extent = f"{row['extent']}{' *' if row['sd_seam'] else ''}"
        lines.append(
            f"| {row['seam']} | {row['method']} | {row['dtype']} | {shape} | {extent} | {row['loop_ms']:.4f} | "
            f"{row['vectorized_ms']:.4f} | {row['speedup']:.2f}x | {row['loop_ops']} | {row['vectorized_ops']} |"
        )
    return "\n".join(lines)


def describe(row: dict) -> str:
    """One row in words: seam, method, dtype, tile shape, extent and speedup."""
    shape = "x".join(str(size) for size in row["shape"])
    return f"{row['seam']} {row['method']} {row['dtype']} {shape} extent {row['extent']}: {row['speedup']:.2f}x"


def summary(rows: list[dict]) -> str:
    """The worst speedup of `rows` and every row below 1.0x, each as it was measured."""
    if not rows:
        return "no rows"
    slower = [describe(row) for row in rows if row["speedup"] < 1]
    lines = [f"worst speedup: {describe(min(rows, key=lambda row: row['speedup']))}"]
    lines.append(f"slower than the loop: {'; '.join(slower) or 'none'}")
    return "\n".join(lines)


def add_parser(subparsers) -> None:
    parser = add_benchmark_parser(subparsers, "blend", "time the seam blend alone: loop vs vectorized", __doc__, main)
    parser.add_argument(
        "--seams",
        nargs="+",
        choices=["sd", "video"],
        default=["sd", "video"],
        help="sd: SD tiles at every --extents; video: the video autoencoders' seams (default: both)",
    )
    parser.add_argument("--device", type=arguments.device, default="cpu", help="device to run on (default: cpu)")
    parser.add_argument("--dtype", nargs="+", choices=list(DTYPES), default=list(DTYPES), help="dtypes (default: all)")
    parser.add_argument("--method", nargs="+", choices=METHODS, default=list(METHODS), help="methods (default: all)")
    parser.add_argument(
        "--extents",
        nargs="+",
        type=sd_extent,
        default=list(DEFAULT_EXTENTS),
        help="blend extents of the sd seams (default: 1 2 4 ... 512)",
    )
    parser.add_argument(
        "--repeats", type=arguments.positive_int, default=60, help="timed calls per arm and row (default: 60)"
    )
    parser.add_argument(
        "--budget", type=float, default=3.0, help="seconds of timed calls per row, at least 5 calls each (default: 3)"
    )
    parser.add_argument(
        "--threads", type=arguments.positive_int, help="CPU threads for torch (default: torch's default)"
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        type=arguments.output_file,
        help="also write the machine and one record per row to PATH",
    )


def main(args: argparse.Namespace) -> int:
    """Run the benchmark, print the table, and write the JSON report if asked; returns 0."""
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    machine = machine_info(device)
    print(", ".join(f"{key}: {value}" for key, value in machine.items() if value is not None))
    header = format_table([])
    print(header, flush=True)
    seams = []  # (seam name, method, tile shape, extent)
    if "sd" in args.seams:
        seams += [("SD", method, TILE_SHAPES[method], extent) for method in args.method for extent in args.extents]
    if "video" in args.seams:
        seams += [
            (name, method, shape, extent)
            for name, methods, shape, extent in VIDEO_SEAMS
            for method in methods
            if method in args.method
        ]
    rows = []
    for seam, method, shape, extent in seams:
        for dtype_name in args.dtype:
            rows.append(bench_row(seam, method, shape, DTYPES[dtype_name], extent, device, args.repeats, args.budget))
            print(format_table(rows[-1:]).removeprefix(header + "\n"), flush=True)
    print("\n" + summary(rows))
    if args.json:
        write_record(args.json, {"machine": machine, "rows": rows})
    return 0
