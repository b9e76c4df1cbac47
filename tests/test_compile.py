"""tileblend under `torch.compile` on the CPU: what stays bit for bit (docs/design.md, "torch.compile").

Inductor computes float16/bfloat16 rows in float32 and drops some of the eager roundings, so with its default settings
compiled tileblend equals the eager (and the compiled) loop in float32/float64 only; in half precision it equals the
eager loop with `torch._inductor.config.emulate_precision_casts = True`. That holds from torch 2.13 on (the pinned and
the newest release); on older releases Inductor is not bitwise here (2.4.1 to 2.6.0 measured: not in any dtype), so
those tests are skipped there. Inductor compiles are slow on a small CPU: each test compiles one graph per variant
holding all three blends for all dtypes it checks.
"""

import json

import pytest
import torch

from tileblend import blend, enabled, reference
from tileblend.bench.compile import INDUCTOR_EXACT_FROM
from tileblend.calls import record_blends
from tileblend.compare import bitwise_equal


pytestmark = pytest.mark.slow  # Inductor compiles and benchmark workers: not in the fast tier (`-m "not slow"`)


DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
HALF = (torch.float16, torch.bfloat16)
# A long seam, a short one and a clipped one (the tiles have 10 frames).
EXTENTS = {"blend_v": 8, "blend_h": 2, "blend_t": 12}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture(scope="module")
def tiles():
    generator = torch.Generator().manual_seed(0)
    return {
        dtype: tuple((torch.randn(1, 2, 10, 16, 16, generator=generator) * 8).to(dtype) for _ in range(2))
        for dtype in DTYPES
    }


def blend_all(functions):
    """A function blending, for each dtype, a copy of b with a along axes -2, -1 and -3, using `functions`."""

    def run(tiles):
        results = {}
        for dtype, (a, b) in tiles.items():
            b = b.clone()
            for name, extent in EXTENTS.items():
                functions[name](a, b, extent)
            results[dtype] = b
        return results

    return run


inductor_exact = pytest.mark.skipif(
    torch.__version__ < INDUCTOR_EXACT_FROM,
    reason=f"Inductor keeps the blends bitwise from torch 2.13 on, not on {torch.__version__} (docs/design.md)",
)


def compiled(function):
    return torch.compile(function, backend="inductor", fullgraph=True, dynamic=False)


@inductor_exact
def test_inductor_blends_equal_the_loop_in_float32_and_float64(tiles):
    full = {dtype: tiles[dtype] for dtype in DTYPES if dtype not in HALF}
    eager_loop = blend_all(reference.REFERENCE_FUNCTIONS)(full)
    compiled_loop = compiled(blend_all(reference.REFERENCE_FUNCTIONS))(full)
    compiled_tileblend = compiled(blend_all(blend.BLEND_FUNCTIONS))(full)
    for dtype, (_, b) in full.items():
        assert not bitwise_equal(b, compiled_tileblend[dtype])  # the blends ran
        assert bitwise_equal(compiled_loop[dtype], compiled_tileblend[dtype]), dtype
        assert bitwise_equal(eager_loop[dtype], compiled_tileblend[dtype]), dtype


@inductor_exact
def test_inductor_blends_with_emulated_precision_casts_equal_eager_loop(tiles):
    half = {dtype: tiles[dtype] for dtype in HALF}
    eager_loop = blend_all(reference.REFERENCE_FUNCTIONS)(half)
    with torch._inductor.config.patch(emulate_precision_casts=True):
        compiled_tileblend = compiled(blend_all(blend.BLEND_FUNCTIONS))(half)
        torch._dynamo.reset()
        compiled_loop = compiled(blend_all(reference.REFERENCE_FUNCTIONS))(half)
    for dtype in HALF:
        assert not bitwise_equal(half[dtype][1], compiled_tileblend[dtype])
        assert bitwise_equal(eager_loop[dtype], compiled_tileblend[dtype]), dtype
        # From torch 2.15 Inductor rounds the loop's Python-float weights to the tile's dtype before multiplying, even
        # with emulate_precision_casts (no setting restores eager's float32 weights); tileblend's weights are tensors.
        assert bitwise_equal(eager_loop[dtype], compiled_loop[dtype]) is (torch.__version__ < "2.15"), dtype


TINY_KL = {
    "block_out_channels": [4],
    "down_block_types": ["DownEncoderBlock2D"],
    "up_block_types": ["UpDecoderBlock2D"],
    "latent_channels": 4,
    "norm_num_groups": 2,
    "sample_size": 32,
    "mid_block_add_attention": False,
}
"""One decoder level, no attention: 32-px tiles every 24 px, 8-row seams, so a 40x40 latent decodes as 2x2 tiles."""


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_tiled_decode_compiles_as_one_graph_equal_to_eager_loops(dtype):
    # AOTAutograd without Inductor: the whole tiled decode (tile loop, in-place blends into tiles) as one functionalized
    # graph. An Inductor compile of even this decoder takes minutes on two cores, so Inductor's arithmetic is checked
    # on the blends above, and on whole decodes by `tileblend bench compile`.
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    model = AutoencoderKL(**TINY_KL).to(dtype).eval()
    model.enable_tiling()
    latents = torch.randn(1, 4, 40, 40, generator=torch.Generator().manual_seed(1)).to(dtype)
    with torch.no_grad():
        eager_loops = model.tiled_decode(latents).sample
        with enabled(), record_blends(type(model)) as calls:
            decode = torch.compile(model.tiled_decode, backend="aot_eager", fullgraph=True, dynamic=False)
            actual = decode(latents).sample
    assert calls.counts()["blend_v"] > 0 and calls.counts()["blend_h"] > 0
    assert bitwise_equal(eager_loops, actual)


def test_bench_compile_counts_graphs_and_checks_outputs(tmp_path):
    from tileblend.cli import main as tileblend

    record_path = tmp_path / "compile.json"
    argv = ["bench", "compile", "--models", "kl", "--backends", "eager", "--device", "cpu", "--reps", "1"]
    code = tileblend(argv + ["--warmup", "0", "--threads", "1", "--json", str(record_path)])
    record = json.loads(record_path.read_text())

    assert code == 0
    [row] = record["rows"]
    assert (row["model"], row["backend"], row["outputs_equal"]) == ("kl", "eager", True)
    loops, vectorized = row["arms"]["A"], row["arms"]["B"]
    assert loops["blend_calls"] == vectorized["blend_calls"] > 0
    assert (
        loops["graphs"] == vectorized["graphs"]
    )  # tileblend adds no graph break (diffusers 0.36 on torch 2.4 has one)
    assert loops["fx_nodes"] > vectorized["fx_nodes"] > 0  # the loops unroll every blended row into the graph
    assert loops["equal_to_eager"] and vectorized["equal_to_eager"]
    assert len(vectorized["compile_samples_s"]) == 1 and vectorized["steady_ms"] > 0
