"""The method checks of `tileblend verify` (`--quick` runs only these): each loop blend that `tileblend.enable()` would
patch against its vectorized replacement, bit for bit on random and special tiles. Nothing is timed: verify is about
exactness; `tileblend bench blend` measures speed with its spread and the machine's load.
"""

import sys
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from ..blend import DTYPE_NAMES
from ..compare import bitwise_equal
from ..patch import PatchedMethod, autoencoder_classes, find_loop_blends, original_method, vectorized_method


@dataclass
class MethodResult:
    """The verdict for one method and dtype."""

    cls: str
    method: str
    dtype: str
    exact: bool
    cases: int


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
    return MethodResult(
        cls=patched.cls.__name__, method=patched.method, dtype=DTYPE_NAMES[dtype], exact=exact, cases=cases
    )


def verify_methods(device, dtypes, progress: bool = True) -> list[MethodResult]:
    """Run `verify_method` for every loop blend in the installed diffusers and every dtype."""
    found, _ = find_loop_blends(autoencoder_classes())
    cases = [(patched, dtype) for patched in found for dtype in dtypes]
    bar = tqdm(cases, desc="blend methods", unit="check", file=sys.stderr, disable=not progress)
    return [verify_method(patched, dtype, device) for patched, dtype in bar]
