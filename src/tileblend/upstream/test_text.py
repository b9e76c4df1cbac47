"""The test code `tileblend rewrite` adds to a diffusers checkout with upstream's tester-mixin layout.

`REFERENCE` is `blend_row_loop`, the row loop the blend methods replace, and `MIXIN` the
`AutoencoderTilingBlendTesterMixin` class; both are appended to `tests/models/autoencoders/testing_utils.py`, whose
`from ...testing_utils import ...` gains `assert_tensors_close` and `require_torch_gpu` (`TESTING_UTILS_IMPORTS`).
`test_class` renders the per-model test class composing a model's `<Model>TesterConfig` with the mixin. All of it is
written in upstream's style (pytest, tester mixins, tiny real models, upstream's own assertion helper at zero
tolerance, no spies on the model under test) and is already formatted as ruff formats it.
"""

import textwrap
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
    Tests that the model's own `blend_v`, `blend_h` and `blend_t` give the result of `{REFERENCE_NAME}`, the row loop
    they vectorize, bit for bit and in place, on the tiles its tiled encode and decode blend when `tiling_kwargs` cut
    `get_tiling_inputs()` into overlapping tiles: along each blended axis, the interior and clipped edge tiles and
    the overlap of the model's tiling; across it, the first tile's size.

    The geometry comes from the model's tiling attributes (`get_tile_grid()`) and from the output shape of each tiled
    pass without tiling (`get_tiling_blend_shapes()`). The test class sets `tiling_kwargs` and `get_tiling_inputs()`
    so that tiles overlap along every blended axis, by an overlap that is not a power of two somewhere: half-precision
    weights of small power-of-two overlaps are exact, so only other overlaps tell the loop's rounding from others.
    """

    blend_dims = {{"blend_v": -2, "blend_h": -1, "blend_t": -3}}
    # The blend methods the tiled passes call; a video model that also tiles frames adds "blend_t".
    tiling_blend_methods = {_names_tuple(DEFAULT_METHODS)}

    def get_tile_grid(self, model):
        """Per blend method: the tile size, stride and compression ratio along its axis, in sample pixels or frames."""
        ratio = model.spatial_compression_ratio
        grid = {{
            "blend_v": (model.tile_sample_min_height, model.tile_sample_stride_height, ratio),
            "blend_h": (model.tile_sample_min_width, model.tile_sample_stride_width, ratio),
        }}
        if "blend_t" in self.tiling_blend_methods:
            frames = (model.tile_sample_min_num_frames, model.tile_sample_stride_num_frames)
            grid["blend_t"] = (*frames, model.temporal_compression_ratio)
        return grid

    def get_tiling_blend_shapes(self, model):
        """Per tiled pass, the shape of its output without tiling, into which its tiles are blended."""
        sample = self.get_tiling_inputs()["sample"]
        with torch.no_grad():
            moments = model.encode(sample).latent_dist.parameters
        return {{"encode": moments.shape, "decode": sample.shape}}

    def get_tiled_model(self):
        """
        The model with tiling enabled by `tiling_kwargs`, and the distinct (method, shape of `a`, shape of `b`,
        blend_extent) that its tiled passes blend.
        """
        model = self.model_class(**self.get_init_dict()).eval().to(torch_device)
        shapes = self.get_tiling_blend_shapes(model)
        model.enable_tiling(**self.tiling_kwargs)
        seams = set()
        for name, shape in shapes.items():
            tile_lengths, first_tile = {{}}, list(shape)
            for method, (tile, stride, ratio) in self.get_tile_grid(model).items():
                if name == "encode":
                    tile, stride = tile // ratio, stride // ratio
                dim, previous_frame = self.blend_dims[method], int(method == "blend_t")
                # Tiles start every `stride` and are cut at the end of the output. A frame tile also holds the frame
                # before it, which every tile but the first drops.
                lengths = [min(tile + previous_frame, shape[dim])]
                starts = range(stride, shape[dim], stride)
                lengths += [min(tile, shape[dim] - previous_frame - start) for start in starts]
                tile_lengths[method] = (lengths, tile - stride)
                first_tile[dim] = lengths[0]
            for method, (lengths, blend_extent) in tile_lengths.items():
                dim = self.blend_dims[method]
                # Frames are blended after the spatial tiles of each frame tile are; those within the first frame tile.
                across = shape if method == "blend_t" else first_tile
                for length_a, length_b in zip(lengths, lengths[1:]):
                    shape_a, shape_b = list(across), list(across)
                    shape_a[dim], shape_b[dim] = length_a, length_b
                    seams.add((method, tuple(shape_a), tuple(shape_b), blend_extent))
        return model, sorted(seams)

    def test_tiling_blends_match_row_loop(self):
        model, seams = self.get_tiled_model()
        overlaps = {{name: [] for name in self.tiling_blend_methods}}
        for name, a, b, extent in seams:
            overlaps[name].append(min(a[self.blend_dims[name]], b[self.blend_dims[name]], extent))
        for name, values in overlaps.items():
            assert max(values, default=0) > 0, f"The tiling inputs must span two tiles that {{name}} blends."
        assert any(value & (value - 1) for values in overlaps.values() for value in values), (
            "At least one overlap must not be a power of two."
        )

        # MPS has neither float64 nor, in the tests, bfloat16.
        dtypes = [torch.float32, torch.float16]
        if torch_device != "mps":
            dtypes += [torch.bfloat16, torch.float64]
        generator = torch.Generator("cpu").manual_seed(0)
        for dtype in dtypes:
            for method, shape_a, shape_b, blend_extent in seams:
                dim = self.blend_dims[method]
                a = torch.randn(shape_a, generator=generator).to(torch_device, dtype)
                # `b` is a strided view, as the tiles of several models are.
                b = torch.randn(shape_b, generator=generator).to(torch_device, dtype)
                b = torch.cat([b, b], dim=dim).narrow(dim, shape_b[dim], shape_b[dim])
                a_before = a.clone()
                expected = {REFERENCE_NAME}(a.clone(), b.clone(), blend_extent, dim)

                assert getattr(model, method)(a, b, blend_extent) is b
                msg = f"{{method}} must match the row loop bitwise in {{dtype}}."
                assert_tensors_close(b, expected, atol=0, rtol=0, msg=msg)
                assert_tensors_close(a, a_before, atol=0, rtol=0, msg=f"{{method}} must not modify `a`.")

    @require_torch_gpu
    def test_tiling_blends_cuda_graph(self):
        model, seams = self.get_tiled_model()
        generator = torch.Generator("cpu").manual_seed(0)
        for method, shape_a, shape_b, blend_extent in seams:
            a = torch.zeros(shape_a, device="cuda")
            b = torch.zeros(shape_b, device="cuda")
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                getattr(model, method)(a, b.clone(), blend_extent)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                getattr(model, method)(a, b, blend_extent)
            for replay in range(3):
                a.copy_(torch.randn(shape_a, generator=generator))
                b_before = torch.randn(shape_b, generator=generator).to("cuda")
                b.copy_(b_before)
                graph.replay()
                expected = {REFERENCE_NAME}(a.clone(), b_before, blend_extent, self.blend_dims[method])
                assert_tensors_close(b, expected, atol=0, rtol=0, msg=f"Replay {{replay}} of {{method}} differs.")
'''


@dataclass(frozen=True)
class TilingBlendCase:
    """What one model's tests need to cut its tester inputs into overlapping tiles.

    Args:
        settings: the `enable_tiling()` arguments (`tiling_kwargs`), each a multiple of the model's compression.
        inputs: the body of `get_tiling_inputs()` where the config's dummy inputs fit in one tile (lines at
            method-body indent), or None to use `get_dummy_inputs()`.
        init: the body of a `get_init_dict()` override of the test class, or None to use the config's own.
        reason: why `inputs` or `init` differ from the config's, written as a comment above them.
        methods: the blend methods the tiled passes call (the mixin's `tiling_blend_methods`), written in the test
            class where they are not the mixin's default.
        overrides: methods of the test class (at class-body indent 0) that override the mixin's geometry for a model
            that names its tiling attributes or outputs otherwise, or add a model's own test.
        imports: names the overrides use that the test file imports from `...testing_utils`.
    """

    settings: dict
    inputs: str | None = None
    init: str | None = None
    reason: str | None = None
    methods: tuple[str, ...] = DEFAULT_METHODS
    overrides: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()


def _comment(text: str) -> list[str]:
    """`text` as comment lines at indent 0 that fit in `LINE_LENGTH` at class-body indent."""
    return [f"# {line}\n" for line in textwrap.wrap(text, LINE_LENGTH - 6)]


def _indented(text: str) -> list[str]:
    """The lines of `text` at class-body indent."""
    return [f"    {line}\n" if line.strip() else "\n" for line in text.splitlines()]


def tiling_members(case: TilingBlendCase) -> list[tuple[str, str]]:
    """(name, text at class-body indent 0) of `tiling_kwargs` and `get_tiling_inputs()` for `case`."""
    kwargs = ["@property\n", "def tiling_kwargs(self):\n"]
    if case.settings:
        kwargs += ["    return {\n", *[f'        "{name}": {value!r},\n' for name, value in case.settings.items()]]
        kwargs += ["    }\n"]
    else:
        kwargs = ["# `enable_tiling()` takes no arguments: the tile size is the config's `sample_size`.\n", *kwargs]
        kwargs += ["    return {}\n"]
    inputs = ["def get_tiling_inputs(self):\n"]
    if case.inputs is None:
        inputs += ["    return self.get_dummy_inputs()\n"]
    else:
        if case.reason and case.init is None:
            inputs = [*_comment(case.reason), *inputs]
        inputs += [f"    {line}\n" for line in case.inputs.splitlines()]
    return [("tiling_kwargs", "".join(kwargs)), ("get_tiling_inputs", "".join(inputs))]


def test_class(model: str, config: str, case: TilingBlendCase) -> str:
    """The test class composing `config` (the model's `<Model>TesterConfig`) with the mixin, ruff-formatted."""
    header = f"class Test{model}{TEST_CLASS_SUFFIX}({config}, {MIXIN_NAME}):\n"
    if len(header) - 1 > LINE_LENGTH:
        header = f"class Test{model}{TEST_CLASS_SUFFIX}(\n    {config}, {MIXIN_NAME}\n):\n"
    blocks = []
    if case.methods != DEFAULT_METHODS:
        blocks.append([f"    tiling_blend_methods = {_names_tuple(case.methods)}\n"])
    if case.init is not None:
        init = [
            *_comment(case.reason),
            "def get_init_dict(self):\n",
            *[f"    {line}\n" for line in case.init.splitlines()],
        ]
        blocks.append(_indented("".join(init)))
    blocks += [_indented(text) for _, text in tiling_members(case)]
    blocks += [_indented(text) for text in case.overrides]
    lines = [header]
    for index, block in enumerate(blocks):
        lines += (["\n"] if index else []) + block
    return "".join(lines)
