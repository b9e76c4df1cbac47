"""The standalone test module `tileblend rewrite` writes into a diffusers checkout without upstream's tester-mixin
layout (older diffusers; checkouts with it get `tileblend.upstream.test_files`' tester-mixin edits instead), next to
its autoencoder tests.

It imports only torch, pytest and diffusers, and checks, for every rewritten class, that its blend methods equal a
row loop written in the test bit for bit (float32, float16, bfloat16; clipped, zero and negative extents; `b` a
non-contiguous view blended in place), that tiled encode and decode of a tiny AutoencoderKL and a tiny
AutoencoderKLWan reach the blends and give the same bits as with the loop, and that a blend replays correctly from a
CUDA graph (skipped without CUDA).
"""

import re
from pathlib import Path

from .model_files import MethodId
from .written_tests import written


ROW = re.compile(r'    \("(\w+)", "(\w+)", "(blend_[vht])"\),\n')  # a row of `BLEND_METHODS`, as `_rows` writes it
TEST_MODULE_PATH = Path("tests", "models", "autoencoders", "test_models_autoencoder_tiling_blend.py")

TEMPLATE = '''\
# Licensed under the Apache License, Version 2.0 (the "License"); you may not use this file except in compliance with
# the License. You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software distributed under the License is distributed on
# an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the License for the
# specific language governing permissions and limitations under the License.
"""
Exactness of the tile blends shared through `AutoencoderMixin.blend_v/h/t`: every copy must give the row loop's
result bit for bit, in place, and tiled encode/decode must reach them.
"""

import importlib

import pytest
import torch

from diffusers import AutoencoderKL, AutoencoderKLWan


# (module of diffusers.models.autoencoders, class, method) for every copy of the AutoencoderMixin blends.
BLEND_METHODS = [
@METHODS@]
AXES = {"blend_v": -2, "blend_h": -1, "blend_t": -3}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# (tile length along the blended axis of a, of b, blend_extent): plain, clipped by either tile, zero, negative.
EXTENTS = [(8, 8, 4), (8, 3, 4), (2, 8, 4), (8, 8, 0), (8, 8, -2), (6, 6, 1)]


def loop_blend(a, b, blend_extent, dim):
    """The row loop the vectorized blends replace."""
    blend_extent = min(a.shape[dim], b.shape[dim], blend_extent)
    for y in range(blend_extent):
        row = a.select(dim, -blend_extent + y) * (1 - y / blend_extent) + b.select(dim, y) * (y / blend_extent)
        b.select(dim, y).copy_(row)
    return b


def bits(tensor):
    """The tensor's bits as integers, so that equality is bitwise."""
    return tensor.view(torch.int32 if tensor.dtype == torch.float32 else torch.int16)


def blend_method(module, class_name, method):
    cls = getattr(importlib.import_module(f"diffusers.models.autoencoders.{module}"), class_name)
    return getattr(cls, method)


def tile(length, dim, rank, dtype, seed):
    shape = [2, 3, 5, 6, 7][-rank:]
    shape[dim] = length
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("module, class_name, method", BLEND_METHODS)
def test_blend_is_the_loop_bitwise(module, class_name, method, dtype):
    blend = blend_method(module, class_name, method)
    dim = AXES[method]
    for rank in (4, 5) if method != "blend_t" else (5,):
        for length_a, length_b, extent in EXTENTS:
            a = tile(length_a, dim, rank, dtype, seed=0)
            b = tile(length_b + 1, dim, rank, dtype, seed=1).narrow(dim, 1, length_b)  # a view, as in tiled decode
            a_before, expected = a.clone(), loop_blend(a.clone(), b.clone(), extent, dim)
            assert blend(None, a, b, extent) is b
            assert torch.equal(bits(b), bits(expected))
            assert torch.equal(a, a_before)


def count_blends(model, use_loop):
    """Route the model's blend methods through a counter, and through `loop_blend` if `use_loop`."""
    calls = {}
    for method, dim in AXES.items():
        if hasattr(model, method):
            original = getattr(type(model), method)

            def counted(a, b, blend_extent, method=method, dim=dim, original=original):
                calls[method] = calls.get(method, 0) + 1
                return loop_blend(a, b, blend_extent, dim) if use_loop else original(model, a, b, blend_extent)

            setattr(model, method, counted)
    return calls


def tiled_outputs(model, sample, use_loop):
    model = model.eval()
    calls = count_blends(model, use_loop)
    with torch.no_grad():
        latent = model.encode(sample).latent_dist.mean
        decoded = model.decode(latent).sample
    return latent, decoded, calls


def tiny_autoencoder_kl():
    torch.manual_seed(0)
    model = AutoencoderKL(
        block_out_channels=[2, 4],
        norm_num_groups=2,
        latent_channels=4,
        down_block_types=["DownEncoderBlock2D", "DownEncoderBlock2D"],
        up_block_types=["UpDecoderBlock2D", "UpDecoderBlock2D"],
    )
    model.enable_tiling()  # 32-pixel tiles against a 64-pixel input
    return model


def tiny_autoencoder_wan():
    torch.manual_seed(0)
    model = AutoencoderKLWan(
        base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1, temperal_downsample=[False, True, True]
    )
    model.enable_tiling(
        tile_sample_min_height=32, tile_sample_min_width=32, tile_sample_stride_height=24, tile_sample_stride_width=24
    )
    return model


@pytest.mark.parametrize(
    "build, shape", [(tiny_autoencoder_kl, (1, 3, 64, 64)), (tiny_autoencoder_wan, (1, 3, 5, 64, 64))]
)
def test_tiled_encode_decode_reach_the_blends_and_match_the_loop(build, shape):
    model = build()
    sample = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    latent, decoded, calls = tiled_outputs(model, sample, use_loop=False)
    latent_loop, decoded_loop, calls_loop = tiled_outputs(model, sample, use_loop=True)
    assert calls.get("blend_v", 0) > 0 and calls.get("blend_h", 0) > 0
    assert calls == calls_loop
    assert torch.equal(bits(latent), bits(latent_loop))
    assert torch.equal(bits(decoded), bits(decoded_loop))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need CUDA")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method", ["blend_v", "blend_h", "blend_t"])
def test_blend_replays_from_a_cuda_graph(method, dtype):
    blend = blend_method("vae", "AutoencoderMixin", method)
    dim = AXES[method]
    a = tile(8, dim, 5, dtype, seed=0).cuda()
    b = tile(8, dim, 5, dtype, seed=1).cuda()
    b_before = b.clone()
    blend(None, a.clone(), b.clone(), 4)  # warm up outside the graph
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        blend(None, a, b, 4)
    for seed in (2, 3):
        a.copy_(tile(8, dim, 5, dtype, seed=seed).cuda())
        b.copy_(b_before)
        graph.replay()
        torch.cuda.synchronize()
        expected = loop_blend(a.cpu(), b_before.cpu(), 4, dim)
        assert torch.equal(bits(b.cpu()), bits(expected))
'''


def _rows(classes: dict[str, list[MethodId]]) -> str:
    """The rows of `BLEND_METHODS` for `classes`: module name (in `models/autoencoders`) -> its vectorized methods."""
    return "".join(
        f'    ("{module}", "{method.cls}", "{method.method}"),\n'
        for module, methods in sorted(classes.items())
        for method in methods
    )


def render_test_module(classes: dict[str, list[MethodId]]) -> str:
    """The test module for `classes`: module name (in `models/autoencoders`) -> its vectorized methods."""
    return TEMPLATE.replace("@METHODS@", _rows(classes))


def written_module(text: str) -> bool:
    """Whether `text` (line endings "\\n") is a module tileblend writes: its rows of methods exactly as
    `render_test_module` writes them (one run of rows in its form, modules in its order: a comment or another line
    among them is someone's work), in the current template or an earlier one
    (`tileblend.upstream.written_tests`). A row in tileblend's own form cannot be told from one it wrote."""
    lines = text.splitlines(keepends=True)
    rows = [index for index, line in enumerate(lines) if ROW.fullmatch(line)]
    if not rows:  # no row tells where an earlier template had its rows
        return text == render_test_module({})
    if rows[-1] - rows[0] + 1 != len(rows):
        return False
    middle = lines[rows[0] : rows[-1] + 1]
    classes: dict[str, list[MethodId]] = {}
    for line in middle:
        module, cls, method = ROW.fullmatch(line).groups()
        classes.setdefault(module, []).append(MethodId(cls, method))
    template = "".join([*lines[: rows[0]], "@METHODS@", *lines[rows[-1] + 1 :]])
    return _rows(classes) == "".join(middle) and (template == TEMPLATE or written(template))
