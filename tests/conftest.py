"""What the tests share: the `method` and `dtype` parameters, random tiles, one thread per xdist worker, the `cuda`
marker's skip, and a state folder of their own (the rewriter's journal key) instead of the user's.

A test that takes `method` runs once per blend method of `tileblend.blend` (`BLEND_AXES`), one that takes `dtype`
once per floating dtype the blend is exact for (`tileblend.blend.DTYPES`); a test that needs other values overrides
the fixture with its own `pytest.mark.parametrize`. `random_values` and `random_tiles` are session fixtures that return
builder functions, so hypothesis tests may use them too.
"""

import os
import tempfile
from pathlib import Path

import pytest
import torch

from tileblend.blend import BLEND_AXES, DTYPES


# `make test` runs one pytest-xdist worker per core (`-n 2`); torch's default of one intra-op thread per core in every
# worker would oversubscribe the cores. Outside xdist, torch's default applies.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)

# `tileblend.upstream.journal.journal_key` keeps its key under $XDG_STATE_HOME; the children tests start inherit it.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="tileblend-test-state-")


def pytest_runtest_setup(item):
    """`@pytest.mark.cuda` skips a test on a machine without a CUDA device; `@pytest.mark.cuda(devices=2)` on one with
    fewer than two."""
    marker = item.get_closest_marker("cuda")
    devices = marker.kwargs.get("devices", 1) if marker is not None else 0
    if torch.cuda.device_count() < devices:
        pytest.skip("needs a CUDA device" if devices == 1 else f"needs {devices} CUDA devices")


ROOT = Path(__file__).resolve().parents[1]
UPSTREAM_SNAPSHOTS = (
    ROOT / "upstream-snapshot" / "diffusers-main.tar.gz",
    ROOT.parent / "shared" / "upstream" / "diffusers-main.tar.gz",
)
"""Where the upstream diffusers snapshot is looked for: what `make upstream-snapshot` writes, then a shared copy."""


def find_upstream_snapshot() -> Path | None:
    """The first of `UPSTREAM_SNAPSHOTS` that exists, or None."""
    return next((path for path in UPSTREAM_SNAPSHOTS if path.is_file()), None)


@pytest.fixture(scope="session")
def upstream_snapshot() -> Path:
    """The upstream diffusers snapshot (`UPSTREAM_SNAPSHOTS`). Without it a test skips, or fails where
    TILEBLEND_REQUIRE_SNAPSHOT=1 (CI, which must run the tests on it)."""
    found = find_upstream_snapshot()
    if found is None:
        message = "the upstream diffusers snapshot is absent: run make upstream-snapshot"
        if os.environ.get("TILEBLEND_REQUIRE_SNAPSHOT") == "1":
            pytest.fail(f"{message} (TILEBLEND_REQUIRE_SNAPSHOT=1)")
        pytest.skip(message)
    return found


@pytest.fixture(params=list(BLEND_AXES))
def method(request) -> str:
    """Each blend method name: "blend_v", "blend_h", "blend_t"."""
    return request.param


@pytest.fixture(params=list(DTYPES.values()), ids=list(DTYPES))
def dtype(request) -> torch.dtype:
    """Each floating dtype: float32, float16, bfloat16, float64."""
    return request.param


def _normal(shape, dtype, generator, device="cpu") -> torch.Tensor:
    """Normal values times 4, drawn in float64 on the CPU, then rounded to `dtype` on `device`."""
    return (torch.randn(shape, generator=generator, dtype=torch.float64) * 4).to(device=device, dtype=dtype)


def _random_values(shape, dtype, seed) -> torch.Tensor:
    """A tensor of `shape` and `dtype` of normal values times 4, the same for the same seed."""
    return _normal(shape, dtype, torch.Generator().manual_seed(seed))


def _random_tiles(method, dtype, seed=0, length=16, a_length=None, shape=(2, 3, 6, 7, 8), device="cpu"):
    """A pair [a, b] of random tiles of `shape` with `length` rows along `method`'s axis (`a_length` rows for `a`).

    Both are drawn, `a` first, from one generator seeded with `seed`.
    """
    generator = torch.Generator().manual_seed(seed)
    tiles = []
    for rows in (a_length or length, length):
        tile_shape = list(shape)
        tile_shape[BLEND_AXES[method]] = rows
        tiles.append(_normal(tile_shape, dtype, generator, device))
    return tiles


@pytest.fixture(scope="session")
def random_values():
    """`random_values(shape, dtype, seed)`: a seeded tensor of normal values times 4."""
    return _random_values


@pytest.fixture(scope="session")
def random_tiles():
    """`random_tiles(method, dtype, seed=0, length=16, a_length=None, shape=(2, 3, 6, 7, 8), device="cpu")`: a seeded
    pair [a, b] of tiles for `method`."""
    return _random_tiles
