"""`tileblend verify`: check on this machine that every patched diffusers blend equals its loop bit for bit.

For each loop blend that `tileblend.enable()` would patch, and each dtype, the original method and its vectorized
replacement run on the same random tiles of that model's rank, over extents that are clamped, clipped by a shorter
tile, zero and negative; outputs are compared bit for bit (`tileblend.compare.bitwise_equal`: infinities, signed zeros and
subnormals included). The table also
gives the speedup of the replacement at one larger seam.
"""

import argparse
import json
import sys
from dataclasses import asdict, dataclass

import torch

from .compare import bitwise_equal
from .patch import PatchedMethod, autoencoder_classes, find_loop_blends, original_method, vectorized_method
from .timing import median_ms, time_calls


DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}


@dataclass
class MethodResult:
    """The verdict for one method and dtype."""

    cls: str
    method: str
    dtype: str
    exact: bool
    cases: int
    loop_ms: float
    vectorized_ms: float

    @property
    def speedup(self) -> float:
        return self.loop_ms / self.vectorized_ms


def tile_pairs(rank: int, axis: int, dtype: torch.dtype, device, generator: torch.Generator):
    """Yield (a, b, blend_extent) cases for a blend along `axis` of `rank`-dimensional tiles.

    Covers tiles of equal and unequal lengths along the axis, extents inside the tile, clamped by the shorter tile,
    one, zero and negative, a non-contiguous `b`, and special values (inf, NaN, signed zero, subnormals).
    """
    shape = [2, 3, 7, 12, 10][-rank:] if rank <= 5 else [2] * (rank - 3) + [7, 12, 10]
    for a_length, b_length in ((12, 12), (12, 5), (4, 12)):
        a_shape, b_shape = list(shape), list(shape)
        a_shape[axis], b_shape[axis] = a_length, b_length
        for extent in (-2, 0, 1, 2, 3, 6, 12, 40):
            a = (torch.randn(a_shape, generator=generator, dtype=torch.float64) * 8).to(device, dtype)
            b = (torch.randn(b_shape, generator=generator, dtype=torch.float64) * 8).to(device, dtype)
            yield a, b, extent
    special = torch.tensor([float("inf"), -float("inf"), float("nan"), -0.0, 1e-40, 3e38, 1.0], dtype=torch.float64)
    a = special[torch.randint(len(special), shape, generator=generator)].to(device, dtype)
    b = special[torch.randint(len(special), shape, generator=generator)].to(device, dtype)
    yield a, b, 5
    wide = list(shape)
    wide[-1] *= 2
    b_view = torch.randn(wide, generator=generator, dtype=torch.float64).to(device, dtype)[..., ::2]
    yield torch.randn(shape, generator=generator, dtype=torch.float64).to(device, dtype), b_view, 6


def timing_tiles(rank: int, dtype: torch.dtype, device, generator: torch.Generator):
    """Tiles of a typical decode size for the speed column: 256x256 images, or 8 frames of 128x128 video."""
    shape = (1, 3, 256, 256) if rank == 4 else (1, 3, 8, 128, 128)
    return [torch.randn(shape, generator=generator).to(device, dtype) for _ in range(2)]


def verify_method(patched: PatchedMethod, dtype: torch.dtype, device, seed: int = 0) -> MethodResult:
    """Compare one patched method with its original loop on `device` in `dtype`."""
    loop = original_method(patched.cls, patched.method)
    vectorized = vectorized_method(loop, patched.rank)
    generator = torch.Generator().manual_seed(seed)
    exact, cases = True, 0
    for a, b, extent in tile_pairs(patched.rank, patched.axis, dtype, device, generator):
        expected = loop(None, a, b.clone(), extent)
        actual_b = b.clone()
        actual = vectorized(None, a, actual_b, extent)
        exact &= actual is actual_b and bitwise_equal(expected, actual)
        cases += 1
    a, b = timing_tiles(patched.rank, dtype, device, generator)
    extent = 8 if patched.axis == -3 else 64
    loop_ms = median_ms(time_calls(lambda: loop(None, a, b, extent), device, repeats=7, budget_s=0.5))
    vectorized_ms = median_ms(time_calls(lambda: vectorized(None, a, b, extent), device, repeats=7, budget_s=0.5))
    return MethodResult(
        cls=patched.cls.__name__,
        method=patched.method,
        dtype=str(dtype).removeprefix("torch."),
        exact=exact,
        cases=cases,
        loop_ms=loop_ms,
        vectorized_ms=vectorized_ms,
    )


def verify_methods(device, dtypes) -> list[MethodResult]:
    """Run `verify_method` for every loop blend in the installed diffusers and every dtype."""
    found, _ = find_loop_blends(autoencoder_classes())
    return [verify_method(patched, dtype, device) for patched in found for dtype in dtypes]


def format_table(results: list[MethodResult]) -> str:
    header = f"{'class':<34} {'method':<8} {'dtype':<9} {'exact':<6} {'loop ms':>8} {'vec ms':>8} {'speedup':>8}"
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(
            f"{r.cls:<34} {r.method:<8} {r.dtype:<9} {'yes' if r.exact else 'NO':<6} "
            f"{r.loop_ms:>8.3f} {r.vectorized_ms:>8.3f} {r.speedup:>7.1f}x"
        )
    return "\n".join(lines)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "verify",
        help="check bitwise parity of every patched blend on this machine",
        description="For every diffusers loop blend, compare the original and the vectorized method bit for bit.",
    )
    default_device = "cuda" if torch.cuda.is_available() else "cpu"
    parser.add_argument("--device", default=default_device, help=f"torch device (default: {default_device})")
    parser.add_argument(
        "--dtype", nargs="+", choices=list(DTYPES), default=None, help="dtypes to check (default: all the device has)"
    )
    parser.add_argument("--json", metavar="PATH", help="also write one JSON record per method and dtype to PATH")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Print the parity table; return 1 if any method is not exact."""
    device = torch.device(args.device)
    names = args.dtype or [name for name in DTYPES if not (name == "float64" and device.type == "mps")]
    results = verify_methods(device, [DTYPES[name] for name in names])
    print(format_table(results))
    mismatches = [r for r in results if not r.exact]
    print(f"\n{len(results) - len(mismatches)} of {len(results)} method/dtype pairs exact on {device}.")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump([asdict(r) | {"speedup": r.speedup} for r in results], file, indent=2)
    if mismatches:
        print("MISMATCH: " + ", ".join(f"{r.cls}.{r.method} ({r.dtype})" for r in mismatches), file=sys.stderr)
        return 1
    return 0
