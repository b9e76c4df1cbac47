"""The test code `tileblend rewrite` adds to a diffusers checkout with upstream's tester-mixin layout.

`REFERENCE` is `blend_row_loop`, the row loop the blend methods replace, and `MIXIN` the
`AutoencoderTilingBlendTesterMixin` class; both are appended to `tests/models/autoencoders/testing_utils.py`, whose
`from ...testing_utils import ...` gains `require_torch_gpu` (`TESTING_UTILS_IMPORTS`). `test_class` renders the
per-model test class composing a model's `<Model>TesterConfig` with the mixin; it sets only the model's tiling
arguments and input shape. `ARITHMETIC_MODULE` is the test module of `AutoencoderMixin.blend_v/h/t` themselves, written
at `ARITHMETIC_MODULE_PATH`. All of it is written in upstream's style (pytest, tester mixins, tiny real models, plain
inheritance instead of patching) and is already formatted as ruff formats it.
"""

from dataclasses import dataclass
from pathlib import Path

from .edits import LINE_LENGTH


REFERENCE_NAME = "blend_row_loop"
MIXIN_NAME = "AutoencoderTilingBlendTesterMixin"
TEST_CLASS_SUFFIX = "TilingBlend"
# Added to the `from ...testing_utils import ...` of tests/models/autoencoders/testing_utils.py.
TESTING_UTILS_IMPORTS = ("require_torch_gpu",)
ARITHMETIC_MODULE_PATH = Path("tests", "models", "autoencoders", "test_models_autoencoder_mixin_blend.py")
ARITHMETIC_CLASS = f"TestAutoencoderMixin{TEST_CLASS_SUFFIX}"

REFERENCE = f'''\
def {REFERENCE_NAME}(a, b, blend_extent, dim):
    """Reference blend, one row at a time."""
    blend_extent = min(a.shape[dim], b.shape[dim], blend_extent)
    for y in range(blend_extent):
        row = a.select(dim, y - blend_extent) * (1 - y / blend_extent) + b.select(dim, y) * (y / blend_extent)
        b.select(dim, y).copy_(row)
    return b
'''

MIXIN = f'''\
class {MIXIN_NAME}:
    """
    Tests that the model's tiled forward (tiled encode, then tiled decode) gives bit for bit what a subclass of it
    whose `blend_v`, `blend_h` and `blend_t` are `{REFERENCE_NAME}` gives. The test class sets `tiling_input_shape`, an
    input the tiled forward splits into overlapping tiles, and `tiling_kwargs` where `enable_tiling()` needs others.
    """

    tiling_kwargs = {{
        "tile_sample_min_height": 40,
        "tile_sample_min_width": 40,
        "tile_sample_stride_height": 16,
        "tile_sample_stride_width": 16,
    }}

    def get_tiled_model(self, model_class, dtype):
        model = model_class(**self.get_init_dict()).to(torch_device, dtype).eval()
        model.enable_tiling(**self.tiling_kwargs)
        return model

    def get_tiling_inputs(self, dtype):
        sample = torch.randn(self.tiling_input_shape, generator=torch.Generator().manual_seed(0))
        return {{**self.get_dummy_inputs(), "sample": sample.to(torch_device, dtype)}}

    @staticmethod
    def tiled_forward(model, inputs):
        with torch.no_grad():
            return model(**inputs, return_dict=False)[0]

    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
    def test_tiling_matches_row_loop(self, dtype):
        if torch_device == "cpu" and dtype != torch.float32:
            pytest.skip(reason=f"{{dtype}} is tested on accelerators only")

        class RowLoopModel(self.model_class):
            def blend_v(self, a, b, blend_extent):
                return {REFERENCE_NAME}(a, b, blend_extent, -2)

            def blend_h(self, a, b, blend_extent):
                return {REFERENCE_NAME}(a, b, blend_extent, -1)

            def blend_t(self, a, b, blend_extent):
                return {REFERENCE_NAME}(a, b, blend_extent, -3)

        model = self.get_tiled_model(self.model_class, dtype)
        row_loop_model = self.get_tiled_model(RowLoopModel, dtype)
        row_loop_model.load_state_dict(model.state_dict())
        output = self.tiled_forward(model, self.get_tiling_inputs(dtype))
        expected = self.tiled_forward(row_loop_model, self.get_tiling_inputs(dtype))
        assert torch.equal(output, expected), "The tiled forward must match the row loop's bit for bit."

    @require_torch_gpu
    def test_tiling_cuda_graph(self):
        inputs = self.get_tiling_inputs(torch.float32)
        if "generator" in inputs:
            pytest.skip("The model draws noise, which a graph replay draws anew.")
        model = self.get_tiled_model(self.model_class, torch.float32)
        stream = torch.cuda.Stream()  # warm-up on a side stream, as PyTorch's CUDA Graphs notes do
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self.tiled_forward(model, inputs)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            output = self.tiled_forward(model, inputs)
        inputs["sample"].normal_()
        graph.replay()
        assert torch.equal(output, self.tiled_forward(model, inputs)), "The replay must match the eager forward."
'''

ARITHMETIC_MODULE = f"""\
# Copyright 2026 HuggingFace Inc.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

import pytest
import torch

from diffusers.models.autoencoders.vae import AutoencoderMixin
from diffusers.utils.torch_utils import maybe_adjust_dtype_for_device

from ...testing_utils import torch_device
from .testing_utils import {REFERENCE_NAME}


class {ARITHMETIC_CLASS}:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
    @pytest.mark.parametrize("ndim", [4, 5])
    @pytest.mark.parametrize("name, dim", [("blend_v", -2), ("blend_h", -1), ("blend_t", -3)])
    def test_blend_matches_row_loop(self, name, dim, ndim, dtype):
        if maybe_adjust_dtype_for_device(dtype, torch.device(torch_device)) != dtype:
            pytest.skip(reason=f"{{torch_device}} has no {{dtype}}")
        generator = torch.Generator().manual_seed(0)
        shape = [2, 3, 4, 5, 6][-ndim:]
        shape[dim] = 200
        a = torch.randn(shape, generator=generator).to(torch_device, dtype)
        a_before = a.clone()
        shape[dim] = 192
        for blend_extent in [0, 1, 7, 48, 192, 200]:  # `b` has 192 rows: the last extent is clipped
            b = torch.randn([*shape, 2], generator=generator).to(torch_device, dtype)[..., 0]  # a strided view
            expected = {REFERENCE_NAME}(a_before, b.clone(), blend_extent, dim)
            assert getattr(AutoencoderMixin(), name)(a, b, blend_extent) is b and torch.equal(a, a_before)
            assert torch.equal(b, expected), f"{{name}} must match the row loop at extent {{blend_extent}}."
"""


@dataclass(frozen=True)
class TilingBlendCase:
    """What one model's test class sets so that its tiled forward blends overlapping tiles.

    Args:
        input_shape: the shape of the input `sample` (`tiling_input_shape`).
        settings: the `enable_tiling()` arguments (`tiling_kwargs`), `{}` where `enable_tiling()` takes none; none where
            the mixin's default ones fit (40-pixel tiles every 16 pixels).
    """

    input_shape: tuple[int, ...]
    settings: dict | None = None


def test_class(model: str, config: str, case: TilingBlendCase) -> str:
    """The test class composing `config` (the model's `<Model>TesterConfig`) with the mixin, ruff-formatted."""
    header = f"class Test{model}{TEST_CLASS_SUFFIX}({config}, {MIXIN_NAME}):\n"
    if len(header) - 1 > LINE_LENGTH:
        header = f"class Test{model}{TEST_CLASS_SUFFIX}(\n    {config}, {MIXIN_NAME}\n):\n"
    lines = [header]
    if case.settings is not None:
        one_line = "    tiling_kwargs = {" + ", ".join(f'"{k}": {v!r}' for k, v in case.settings.items()) + "}\n"
        if len(one_line) - 1 <= LINE_LENGTH:
            lines.append(one_line)
        else:
            lines += [
                "    tiling_kwargs = {\n",
                *[f'        "{k}": {v!r},\n' for k, v in case.settings.items()],
                "    }\n",
            ]
    lines.append(f"    tiling_input_shape = {case.input_shape!r}\n")
    return "".join(lines)
