"""The test code `tileblend rewrite` adds to a diffusers checkout with upstream's tester-mixin layout.

`MIXIN` is the `AutoencoderTilingBlendTesterMixin` class appended to `tests/models/autoencoders/testing_utils.py`;
`test_class` renders the per-model test class composing a model's `<Model>TesterConfig` with it. Both are written in
upstream's style (pytest, tester mixins, tiny real models) and are already formatted as ruff formats them.
"""

from dataclasses import dataclass


MIXIN_NAME = "AutoencoderTilingBlendTesterMixin"
TEST_CLASS_SUFFIX = "TilingBlend"
LINE_LENGTH = 119

MIXIN = f'''\
class {MIXIN_NAME}:
    """
    Tests that tiled encode and decode blend overlapping tiles exactly like the row loop that the
    `AutoencoderMixin.blend_v/h/t` copies replace: `b` blended in place, each product rounded to the tensor's dtype.

    The config provides `tiling_blend_settings`, the tiling attributes set on the model after `enable_tiling()` so
    that the inputs of `get_tiling_blend_inputs()` span several overlapping tiles, and `tiling_blend_clipped`, whether
    that tile grid has an edge tile narrower than the overlap (a blend whose extent is clamped). Tiled runs in the
    dtypes of `tiling_blend_cpu_skip` are skipped on CPU, where some layer of the model has no kernel for them.
    """

    tiling_blend_clipped = False
    tiling_blend_cpu_skip = ()
    blend_dims = {{"blend_v": -2, "blend_h": -1, "blend_t": -3}}

    @property
    def tiling_blend_settings(self) -> dict:
        raise NotImplementedError("Set the tiling attributes that make the inputs span several tiles.")

    def get_tiling_blend_inputs(self) -> dict:
        return self.get_dummy_inputs()

    @staticmethod
    def loop_blend(a, b, blend_extent, dim):
        """The row loop the blend methods replace, along `dim` counted from the end."""
        blend_extent = min(a.shape[dim], b.shape[dim], blend_extent)
        for y in range(blend_extent):
            row = a.select(dim, y - blend_extent) * (1 - y / blend_extent) + b.select(dim, y) * (y / blend_extent)
            b.select(dim, y).copy_(row)
        return b

    @staticmethod
    def bits(tensor):
        """The tensor's bits as integers, so that `torch.equal` compares bit for bit."""
        return tensor.view(torch.int32 if tensor.dtype == torch.float32 else torch.int16)

    def get_tiled_model(self, dtype, device=torch_device):
        torch.manual_seed(0)
        model = self.model_class(**self.get_init_dict()).to(device=device, dtype=dtype).eval()
        model.enable_tiling()
        for name, value in self.tiling_blend_settings.items():
            setattr(model, name, value)
        return model

    def get_inputs(self, dtype, device=torch_device):
        inputs = self.get_tiling_blend_inputs()
        for name, value in inputs.items():
            if torch.is_tensor(value) and value.is_floating_point():
                inputs[name] = value.to(device=device, dtype=dtype)
        return inputs

    @staticmethod
    def output_tensor(output):
        return output.sample if isinstance(output, DecoderOutput) else output

    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
    def test_tiled_blend_matches_loop(self, dtype):
        if torch_device == "cpu" and dtype in self.tiling_blend_cpu_skip:
            pytest.skip(f"{{self.model_class.__name__}} has a layer without a {{dtype}} CPU kernel.")
        model = self.get_tiled_model(dtype)
        with torch.no_grad():
            output = self.output_tensor(model(**self.get_inputs(dtype), return_dict=False)[0])

            # The baseline: the row loop, installed on the model, records (extent, effective extent) of each call.
            calls = []
            for method, dim in self.blend_dims.items():
                if hasattr(model, method):

                    def blend(a, b, blend_extent, dim=dim):
                        calls.append((blend_extent, min(a.shape[dim], b.shape[dim], blend_extent)))
                        return self.loop_blend(a, b, blend_extent, dim)

                    setattr(model, method, blend)
            expected = self.output_tensor(model(**self.get_inputs(dtype), return_dict=False)[0])

        assert any(effective > 0 for _, effective in calls), "The inputs must span overlapping tiles."
        assert any(0 < effective < extent for extent, effective in calls) == self.tiling_blend_clipped
        assert torch.equal(self.bits(output), self.bits(expected)), "Tiled outputs must match the row loop bitwise."

    @pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need CUDA.")
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
    def test_tiled_blend_cuda_graph(self, dtype):
        if "generator" in self.get_tiling_blend_inputs():
            pytest.skip(f"{{self.model_class.__name__}} draws noise from a CPU generator, which a graph cannot replay.")
        model = self.get_tiled_model(dtype, device="cuda")
        inputs = self.get_inputs(dtype, device="cuda")
        with torch.no_grad():
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                model(**inputs, return_dict=False)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                output = self.output_tensor(model(**inputs, return_dict=False)[0])
            for seed in range(1, 4):
                generator = torch.Generator("cpu").manual_seed(seed)
                for value in inputs.values():
                    if torch.is_tensor(value) and value.is_floating_point():
                        value.copy_(torch.randn(value.shape, generator=generator).to(value))
                graph.replay()
                expected = self.output_tensor(model(**inputs, return_dict=False)[0])
                assert torch.equal(self.bits(output), self.bits(expected)), f"Replay {{seed}} differs from eager."

    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
    def test_blend_methods_match_loop(self, dtype):
        model = self.model_class(**self.get_init_dict())
        methods = [method for method in self.blend_dims if hasattr(model, method)]
        assert methods, f"{{self.model_class.__name__}} has no blend methods."
        # Tiles of the rank the model blends: 4D for images, 5D for videos.
        rank = next(value.ndim for value in self.get_tiling_blend_inputs().values() if torch.is_tensor(value))
        generator = torch.Generator("cpu").manual_seed(0)
        for method in methods:
            dim = self.blend_dims[method]
            # (length of a, length of b along `dim`, blend_extent): plain, clipped by either tile, zero, negative.
            for length_a, length_b, extent in [(8, 8, 4), (8, 3, 4), (2, 8, 4), (8, 8, 0), (8, 8, -2), (6, 6, 1)]:
                shape_a, shape_b = [2, 3, 5, 6, 7][-rank:], [2, 3, 5, 6, 7][-rank:]
                shape_a[dim], shape_b[dim] = length_a, length_b + 1
                a = torch.randn(shape_a, generator=generator).to(dtype)
                b = torch.randn(shape_b, generator=generator).to(dtype).narrow(dim, 1, length_b)  # a strided view
                a_before = a.clone()
                expected = self.loop_blend(a.clone(), b.clone(), extent, dim)

                assert getattr(model, method)(a, b, extent) is b
                assert torch.equal(self.bits(b), self.bits(expected)), f"{{method}} differs from the loop."
                assert torch.equal(self.bits(a), self.bits(a_before))
'''


@dataclass(frozen=True)
class TilingBlendCase:
    """What one model's test class needs to reach its blends with its upstream tester config.

    Args:
        settings: tiling attributes set on the model after `enable_tiling()` (name -> value).
        clipped: whether that tile grid clamps a blend's extent (an edge tile narrower than the overlap).
        inputs: the body of `get_tiling_blend_inputs()` when the config's dummy inputs are too small for two
            overlapping tiles (lines at method-body indent), or None to use `get_dummy_inputs()`.
        init: the body of a `get_init_dict()` override, or None to use the config's own.
        reason: why `inputs` or `init` differ from the config's, written as a comment above them.
        cpu_skip: dtypes (source text of a tuple) some layer of the model has no CPU kernel for, or None.
    """

    settings: dict
    clipped: bool = False
    inputs: str | None = None
    init: str | None = None
    reason: str | None = None
    cpu_skip: str | None = None


def test_class(model: str, config: str, case: TilingBlendCase) -> str:
    """The test class composing `config` (the model's `<Model>TesterConfig`) with the mixin, ruff-formatted."""
    header = f"class Test{model}{TEST_CLASS_SUFFIX}({config}, {MIXIN_NAME}):\n"
    if len(header) - 1 > LINE_LENGTH:
        header = f"class Test{model}{TEST_CLASS_SUFFIX}(\n    {config}, {MIXIN_NAME}\n):\n"
    lines = [header, f'    """Tiled {model} blends its tiles exactly like the row loop."""\n', "\n"]
    if case.clipped:
        lines += ["    tiling_blend_clipped = True\n", "\n"]
    if case.cpu_skip:
        lines += [f"    tiling_blend_cpu_skip = {case.cpu_skip}\n", "\n"]
    lines += ["    @property\n", "    def tiling_blend_settings(self):\n", "        return {\n"]
    lines += [f'            "{name}": {value!r},\n' for name, value in case.settings.items()]
    lines += ["        }\n"]
    reason = [f"    # {case.reason}\n"] if case.reason else []
    for name, body in (("get_init_dict", case.init), ("get_tiling_blend_inputs", case.inputs)):
        if body is not None:
            lines += ["\n", *reason]
            reason = []
            lines += [f"    def {name}(self):\n", *[f"        {line}\n" for line in body.splitlines()]]
    return "".join(lines)
