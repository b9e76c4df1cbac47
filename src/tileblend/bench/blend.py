"""`tileblend bench blend`: the seam blend alone, diffusers' row loop against `tileblend.blend`.

For each of `blend_v`, `blend_h` and `blend_t`, each dtype and each extent, both arms blend the same pair of tiles in
one process: warm-up, then alternating rounds of timed calls (`tileblend.timing.time_calls`), reporting the median of
each arm, the speedup (loop / vectorized) and the aten operators one call dispatches (`tileblend.opcount`). Before
timing, each row checks that both arms give the same bits (`tileblend.compare.bitwise_equal`).

`blend_v` and `blend_h` run on SD-sized decode tiles, (1, 3, 512, 512); extent 128 on them is the seam of a
1024x1024 Stable Diffusion tiled decode. `blend_t` runs on 512 frames of 32x32, (1, 3, 512, 32, 32), so that every
extent up to 512 fits. Both arms blend in place into the same `b` on every call; a blend is a convex combination, so
the values stay finite and normal and every call does the same work.
"""

import argparse
import json
import os
import platform

import torch

from ..blend import BLEND_FUNCTIONS, DTYPES
from ..compare import bitwise_equal
from ..opcount import count_aten_ops
from ..reference import REFERENCE_FUNCTIONS
from ..timing import median_ms, time_calls
from .protocol import cpu_name


METHODS = ("blend_v", "blend_h", "blend_t")
TILE_SHAPES = {"blend_v": (1, 3, 512, 512), "blend_h": (1, 3, 512, 512), "blend_t": (1, 3, 512, 32, 32)}
DEFAULT_EXTENTS = tuple(2**i for i in range(10))  # 1, 2, 4, ..., 512
SD_SEAM_EXTENT = 128
"""Blend extent of a 1024x1024 SD tiled decode: 512-pixel tiles overlapping by 25%."""


def machine_info(device: torch.device) -> dict:
    """Where the numbers come from: platform, CPU (and GPU) name, torch and diffusers versions."""
    import diffusers  # only here: `tileblend` starts without importing diffusers

    return {
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cpu_threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "device": str(device),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "torch": torch.__version__,
        "diffusers": diffusers.__version__,
    }


def bench_row(method: str, dtype: torch.dtype, extent: int, device: torch.device, repeats: int, rounds: int) -> dict:
    """Time both arms of one (method, dtype, extent) row and count their aten operators."""
    loop, vectorized = REFERENCE_FUNCTIONS[method], BLEND_FUNCTIONS[method]
    shape = TILE_SHAPES[method]
    generator = torch.Generator().manual_seed(extent)
    a = torch.randn(shape, generator=generator, dtype=torch.float64).to(device, dtype)
    b = torch.randn(shape, generator=generator, dtype=torch.float64).to(device, dtype)

    if not bitwise_equal(loop(a, b.clone(), extent), vectorized(a, b.clone(), extent)):
        raise AssertionError(f"{method} {dtype} extent {extent}: the vectorized blend differs from the loop")
    loop_ops = sum(count_aten_ops(loop, a, b, extent).values())
    vectorized_ops = sum(count_aten_ops(vectorized, a, b, extent).values())

    # Alternate the arms so that drifting machine load hits both alike.
    loop_samples, vectorized_samples = [], []
    per_round = max(1, repeats // rounds)
    for _ in range(rounds):
        loop_samples += time_calls(lambda: loop(a, b, extent), device, repeats=per_round, warmup=1, budget_s=0.25)
        vectorized_samples += time_calls(
            lambda: vectorized(a, b, extent), device, repeats=per_round, warmup=1, budget_s=0.25
        )
    loop_ms, vectorized_ms = median_ms(loop_samples), median_ms(vectorized_samples)
    return {
        "method": method,
        "dtype": str(dtype).removeprefix("torch."),
        "shape": list(shape),
        "extent": extent,
        "sd_seam": method != "blend_t" and extent == SD_SEAM_EXTENT,
        "loop_ms": loop_ms,
        "vectorized_ms": vectorized_ms,
        "speedup": loop_ms / vectorized_ms,
        "loop_ops": loop_ops,
        "vectorized_ops": vectorized_ops,
        "samples": [len(loop_samples), len(vectorized_samples)],
    }


def format_table(rows: list[dict]) -> str:
    """A Markdown table of `rows`, one line per (method, dtype, extent); the SD-1024 seam rows are marked `*`."""
    lines = [
        "| method | dtype | tile shape | extent | loop ms | vectorized ms | speedup | loop ops | vectorized ops |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        shape = "x".join(str(size) for size in row["shape"])
        extent = f"{row['extent']}{' *' if row['sd_seam'] else ''}"
        lines.append(
            f"| {row['method']} | {row['dtype']} | {shape} | {extent} | {row['loop_ms']:.4f} | "
            f"{row['vectorized_ms']:.4f} | {row['speedup']:.1f}x | {row['loop_ops']} | {row['vectorized_ops']} |"
        )
    return "\n".join(lines)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "blend",
        help="time the seam blend alone: loop vs vectorized",
        description="Time diffusers' row-loop blend (tileblend.reference) against tileblend.blend per method, dtype "
        "and extent, and count the aten operators each dispatches. Rows marked * are the seam of a 1024x1024 SD "
        "tiled decode.",
    )
    parser.add_argument("--device", default="cpu", help="device to run on (default: cpu)")
    parser.add_argument("--dtype", nargs="+", choices=list(DTYPES), default=list(DTYPES), help="dtypes (default: all)")
    parser.add_argument("--method", nargs="+", choices=METHODS, default=list(METHODS), help="methods (default: all)")
    parser.add_argument(
        "--extents", nargs="+", type=int, default=list(DEFAULT_EXTENTS), help="blend extents (default: 1 2 4 ... 512)"
    )
    parser.add_argument("--repeats", type=int, default=40, help="timed calls per arm and row (default: 40)")
    parser.add_argument("--rounds", type=int, default=4, help="alternations of the two arms per row (default: 4)")
    parser.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's default)")
    parser.add_argument("--json", metavar="PATH", help="also write the machine and one record per row to PATH")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Run the benchmark, print the table, and write the JSON report if asked; returns 0."""
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    machine = machine_info(device)
    print(", ".join(f"{key}: {value}" for key, value in machine.items() if value is not None))
    header = format_table([])
    print(header, flush=True)
    rows = []
    for method in args.method:
        for dtype_name in args.dtype:
            for extent in args.extents:
                rows.append(bench_row(method, DTYPES[dtype_name], extent, device, args.repeats, args.rounds))
                print(format_table(rows[-1:]).removeprefix(header + "\n"), flush=True)
    # Where both arms dispatch the same operators the vectorized blend ran the row loop itself: any difference there
    # is measurement noise, so only the other rows are named.
    slower = [
        f"{row['method']} {row['dtype']} extent {row['extent']}"
        for row in rows
        if row["speedup"] < 1 and row["vectorized_ops"] != row["loop_ops"]
    ]
    print(f"\nvectorized form slower than the loop: {', '.join(slower) or 'none'}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as report:
            json.dump({"machine": machine, "rows": rows}, report, indent=2)
            report.write("\n")
    return 0
