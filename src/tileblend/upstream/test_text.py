"""The test code `tileblend rewrite` adds to a diffusers checkout with upstream's tester-mixin layout.

`REFERENCE` is `blend_row_loop`, the row loop the blend methods replace, and `MIXIN` the
`AutoencoderTilingBlendTesterMixin` class; both are appended to `tests/models/autoencoders/testing_utils.py`, whose
`from ...testing_utils import ...` gains `assert_tensors_close` and `require_torch_gpu` (`TESTING_UTILS_IMPORTS`).
`test_class` renders the per-model test class composing a model's `<Model>TesterConfig` with the mixin. All of it is
written in upstream's style (pytest, tester mixins, tiny real models, upstream's own assertion helper at zero
tolerance, no spies on the model under test) and is already formatted as ruff formats it.
"""

from dataclasses import dataclass

from .edits import LINE_LENGTH


REFERENCE_NAME = "blend_row_loop"
MIXIN_NAME = "AutoencoderTilingBlendTesterMixin"
TEST_CLASS_SUFFIX = "TilingBlend"
DEFAULT_METHODS = ("blend_v", "blend_h")  # the mixin's `tiling_blend_methods`
# Added to the `from ...testing_utils import ...` of tests/models/autoencoders/testing_utils.py.
TESTING_UTILS_IMPORTS = ("assert_tensors_close", "require_torch_gpu")


def _names_tuple(names: tuple[str, ...]) -> str:
    """`names` as ruff formats a tuple of strings: `("a", "b")`."""
    return "(" + ", ".join(f'"{name}"' for name in names) + ")"


REFERENCE = f'''\
def {REFERENCE_NAME}(a, b, blend_extent, dim):
    """
    The row loop the autoencoders' `blend_v` (`dim=-2`), `blend_h` (`dim=-1`) and `blend_t` (`dim=-3`) methods
    compute: blends the last rows of `a` into the first rows of `b` along `dim`, in place, and returns `b`.
    """
    blend_extent = min(a.shape[dim], b.shape[dim], blend_extent)
    for y in range(blend_extent):
        row = a.select(dim, y - blend_extent) * (1 - y / blend_extent) + b.select(dim, y) * (y / blend_extent)
        b.select(dim, y).copy_(row)
    return b
'''

MIXIN = f'''\
class {MIXIN_NAME}:
    """
    Tests that tiled encode and decode blend overlapping tiles exactly like `{REFERENCE_NAME}`, the row loop that the
    `AutoencoderMixin.blend_v/h/t` methods vectorize: `b` blended in place, each product rounded to the tensor's dtype.

    The tiling tests of `AutoencoderTesterMixin` use the default tile sizes, which are larger than the dummy inputs,
    so they never reach a blend. Here the config provides `tiling_blend_settings`, the tiling attributes set on the
    model after `enable_tiling()` so that the inputs of `get_tiling_blend_inputs()` span several overlapping tiles.
    """

    blend_dims = {{"blend_v": -2, "blend_h": -1, "blend_t": -3}}
    # The blend methods the tiled forward of `get_tiling_blend_inputs()` calls; a video model that also tiles frames
    # adds "blend_t".
    tiling_blend_methods = {_names_tuple(DEFAULT_METHODS)}

    @property
    def tiling_blend_settings(self) -> dict:
        raise NotImplementedError("Set the tiling attributes that make the inputs span several overlapping tiles.")

    def get_tiling_blend_inputs(self) -> dict:
        return self.get_dummy_inputs()

    def get_tiled_model(self, dtype, device=torch_device, blend=None, methods=None):
        """The model with tiling on and `tiling_blend_settings` applied. With `blend(a, b, blend_extent, dim)`, its
        blend methods (those of `methods`, or all) are replaced by it: used to build the reference models."""
        torch.manual_seed(0)
        model = self.model_class(**self.get_init_dict()).to(device=device, dtype=dtype).eval()
        model.enable_tiling()
        for name, value in self.tiling_blend_settings.items():
            setattr(model, name, value)
        if blend is not None:
            for method in methods or self.blend_dims:
                dim = self.blend_dims[method]
                setattr(model, method, lambda a, b, blend_extent, dim=dim: blend(a, b, blend_extent, dim))
        return model

    def get_tiled_inputs(self, dtype, device=torch_device):
        inputs = self.get_tiling_blend_inputs()
        for name, value in inputs.items():
            if torch.is_tensor(value) and value.is_floating_point():
                inputs[name] = value.to(device=device, dtype=dtype)
        return inputs

    @staticmethod
    def forward_sample(model, inputs):
        return model(**inputs, return_dict=False)[0]

    def get_tiled_output(self, model, dtype):
        with torch.no_grad():
            return self.forward_sample(model, self.get_tiled_inputs(dtype))

    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
    def test_tiled_forward_matches_row_loop(self, dtype):
        # The expected output comes from a second model with the same weights whose blend methods are the row loop;
        # the model under test runs unchanged.
        output = self.get_tiled_output(self.get_tiled_model(dtype), dtype)
        expected = self.get_tiled_output(self.get_tiled_model(dtype, blend={REFERENCE_NAME}), dtype)
        assert_tensors_close(output, expected, atol=0, rtol=0, msg="Tiled outputs must match the row loop bitwise.")

    def test_tiling_blend_inputs_reach_the_blends(self):
        # The tile settings keep the untiled output's shape, and for each method a second model whose method returns
        # `b` untouched gives another tiled output.
        model = self.get_tiled_model(torch.float32)
        output = self.get_tiled_output(model, torch.float32)
        model.disable_tiling()
        assert output.shape == self.get_tiled_output(model, torch.float32).shape, "Tiling must keep the output shape."
        for method in self.tiling_blend_methods:
            unblended = self.get_tiled_model(torch.float32, blend=lambda a, b, blend_extent, dim: b, methods=[method])
            unblended_output = self.get_tiled_output(unblended, torch.float32)
            assert not torch.equal(output, unblended_output), f"The inputs must span tiles that {{method}} blends."

    @require_torch_gpu
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
    def test_tiled_forward_cuda_graph(self, dtype):
        if "generator" in self.get_tiling_blend_inputs():
            pytest.skip(f"{{self.model_class.__name__}} draws noise from a CPU generator, which a graph cannot replay.")
        model = self.get_tiled_model(dtype, device="cuda")
        inputs = self.get_tiled_inputs(dtype, device="cuda")
        with torch.no_grad():
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                model(**inputs, return_dict=False)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                output = self.forward_sample(model, inputs)
            for seed in range(1, 4):
                generator = torch.Generator("cpu").manual_seed(seed)
                for value in inputs.values():
                    if torch.is_tensor(value) and value.is_floating_point():
                        value.copy_(torch.randn(value.shape, generator=generator).to(value))
                graph.replay()
                expected = self.forward_sample(model, inputs)
                assert_tensors_close(output, expected, atol=0, rtol=0, msg=f"Replay {{seed}} differs from eager.")

    @pytest.mark.parametrize(
        "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=["fp32", "fp16", "bf16", "fp64"]
    )
    def test_blend_methods_match_row_loop(self, dtype):
        model = self.model_class(**self.get_init_dict())
        # Tiles of the rank the model blends: 4D for images, 5D for videos.
        rank = next(value.ndim for value in self.get_tiling_blend_inputs().values() if torch.is_tensor(value))
        generator = torch.Generator("cpu").manual_seed(0)
        for method in self.tiling_blend_methods:
            dim = self.blend_dims[method]
            # (length of a, length of b along `dim`, blend_extent): plain, clipped by either tile, zero, negative. At
            # extents 7 and 11, float32 `y * (1 / n)` differs from `y / n` for some y: what CUDA computes when the
            # divisor is a Python number.
            cases = [(8, 8, 4), (12, 12, 7), (16, 11, 12), (8, 3, 4), (2, 8, 4), (8, 8, 0), (8, 8, -2), (6, 6, 1)]
            for length_a, length_b, extent in cases:
                shape_a, shape_b = [2, 3, 5, 6, 7][-rank:], [2, 3, 5, 6, 7][-rank:]
                shape_a[dim], shape_b[dim] = length_a, length_b + 1
                a = torch.randn(shape_a, generator=generator).to(torch_device, dtype)
                b = torch.randn(shape_b, generator=generator).to(torch_device, dtype)
                b = b.narrow(dim, 1, length_b)  # a strided view
                a_before = a.clone()
                expected = {REFERENCE_NAME}(a.clone(), b.clone(), extent, dim)

                assert getattr(model, method)(a, b, extent) is b
                assert_tensors_close(b, expected, atol=0, rtol=0, msg=f"{{method}} must match the row loop bitwise.")
                assert_tensors_close(a, a_before, atol=0, rtol=0, msg=f"{{method}} must not modify `a`.")
'''


@dataclass(frozen=True)
class TilingBlendCase:
    """What one model's test class needs to reach its blends with its upstream tester config.

    Args:
        settings: tiling attributes set on the model after `enable_tiling()` (name -> value).
        inputs: the body of `get_tiling_blend_inputs()` when the config's dummy inputs are too small for two
            overlapping tiles (lines at method-body indent), or None to use `get_dummy_inputs()`.
        init: the body of a `get_init_dict()` override, or None to use the config's own.
        reason: why `inputs` or `init` differ from the config's, written as a comment above them.
        methods: the blend methods the tiled forward calls (the mixin's `tiling_blend_methods`), written in the test
            class where they are not the mixin's default.
    """

    settings: dict
    inputs: str | None = None
    init: str | None = None
    reason: str | None = None
    methods: tuple[str, ...] = DEFAULT_METHODS


def test_class(model: str, config: str, case: TilingBlendCase) -> str:
    """The test class composing `config` (the model's `<Model>TesterConfig`) with the mixin, ruff-formatted."""
    header = f"class Test{model}{TEST_CLASS_SUFFIX}({config}, {MIXIN_NAME}):\n"
    if len(header) - 1 > LINE_LENGTH:
        header = f"class Test{model}{TEST_CLASS_SUFFIX}(\n    {config}, {MIXIN_NAME}\n):\n"
    lines = [header]
    if case.methods != DEFAULT_METHODS:
        lines += [f"    tiling_blend_methods = {_names_tuple(case.methods)}\n", "\n"]
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
