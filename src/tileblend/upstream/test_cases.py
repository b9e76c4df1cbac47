"""Per rewritten class, what its tests need to cut upstream's tiny tester inputs into overlapping tiles.

`CASES` maps a model class to its `TilingBlendCase` (`tileblend.upstream.test_text`): the `enable_tiling()` arguments
and, where the config's dummy inputs fit in one tile, larger inputs, the blend methods its tiled passes call, and the
overrides of the mixin's geometry for models that name their tiling attributes or outputs otherwise. Every tile size and stride is a multiple of the
model's compression ratio, so that encoded and decoded tiles keep the grid, and every class reaches an overlap that
is not a power of two (the mixin's test asserts it): only there do weights rounded to the tile's dtype differ from the
loop's. Measured on upstream main (2026-08).
"""

from .test_text import TilingBlendCase


def _spatial(tile: int, stride: int) -> dict:
    """`enable_tiling()` arguments: square tiles of `tile` sample pixels, one every `stride`."""
    return {
        "tile_sample_min_height": tile,
        "tile_sample_min_width": tile,
        "tile_sample_stride_height": stride,
        "tile_sample_stride_width": stride,
    }


def _frames(tile: int, stride: int) -> dict:
    """`enable_tiling()` arguments: tiles of `tile` frames, one every `stride`."""
    return {"tile_sample_min_num_frames": tile, "tile_sample_stride_num_frames": stride}


def _overlap(tile: int, factor: float) -> dict:
    """`enable_tiling()` arguments of models that take an overlap factor instead of a stride."""
    return {
        "tile_sample_min_height": tile,
        "tile_sample_min_width": tile,
        "tile_overlap_factor_height": factor,
        "tile_overlap_factor_width": factor,
    }


def _sample(shape: str) -> str:
    """The body of a `get_tiling_inputs()` drawing one sample of `shape` from the config's generator."""
    return (
        f'sample = randn_tensor({shape}, generator=self.generator, device=torch_device)\nreturn {{"sample": sample}}'
    )


_WITH_FRAMES = ("blend_v", "blend_h", "blend_t")  # the tiled passes blend frames too
_ONE_TILE = "fits in one tile: larger inputs, so that the tiling tests blend overlapping tiles."

# `get_tile_grid()` of the models whose tile size is `tile_sample_min_size` and whose overlap is a factor.
_SIZE_GRID = """\
def get_tile_grid(self, model):
    tile = model.tile_sample_min_size
    grid = (tile, int(tile * (1 - model.tile_overlap_factor)), tile // model.tile_latent_min_size)
    return {"blend_v": grid, "blend_h": grid}
"""

# `get_tile_grid()` of the models with an overlap factor per axis.
_OVERLAP_GRID = """\
def get_tile_grid(self, model):
    height, width = model.tile_sample_min_height, model.tile_sample_min_width
    return {
        "blend_v": (
            height,
            int(height * (1 - model.tile_overlap_factor_height)),
            height // model.tile_latent_min_height,
        ),
        "blend_h": (
            width,
            int(width * (1 - model.tile_overlap_factor_width)),
            width // model.tile_latent_min_width,
        ),
    }
"""


def _encoded_shapes(latent: str) -> str:
    """`get_tiling_blend_shapes()` of a model whose `encode` output holds the blended latents at `latent`."""
    return f"""\
def get_tiling_blend_shapes(self, model):
    sample = self.get_tiling_inputs()["sample"]
    with torch.no_grad():
        latent = model.encode(sample){latent}
    return {{"encode": latent.shape, "decode": sample.shape}}
"""


# `get_tiling_blend_shapes()` of VidTok: its latents from the config and the ratios, without running its encoder.
_VIDTOK_SHAPES = """\
def get_tiling_blend_shapes(self, model):
    # The encoder's latents: `z_channels`, and the frames and pixels divided by the compression ratios.
    sample = self.get_tiling_inputs()["sample"]
    batch, _, frames, height, width = sample.shape
    ratio = model.tile_sample_min_height // model.tile_latent_min_height
    frames //= model.temporal_compression_ratio
    latent = (batch, model.config.z_channels, frames, height // ratio, width // ratio)
    return {"encode": latent, "decode": sample.shape}
"""
_SAMPLE_SIZE = (
    "`sample_size` is the tile size of `enable_tiling()`: 24-pixel tiles overlap by 6 pixels and by 3 latents, "
    "not powers of two."
)
_FITS = "A video of 16x16 frames " + _ONE_TILE

CASES: dict[str, TilingBlendCase] = {
    "AutoencoderDC": TilingBlendCase(
        _spatial(16, 10),
        overrides=("# The encoder's output is the latent itself, without moments.\n" + _encoded_shapes(".latent"),),
    ),
    "AutoencoderKL": TilingBlendCase(
        {},
        inputs=_sample("(2, 3, 64, 64)"),
        init='return {**super().get_init_dict(), "sample_size": 24}',
        reason=_SAMPLE_SIZE,
        overrides=(
            _SIZE_GRID,
            """\
@require_torch_gpu
def test_tiled_decode_cuda_graph(self):
    model = self.get_tiled_model()[0]
    generator = torch.Generator("cpu").manual_seed(0)
    with torch.no_grad():
        latents = model.encode(self.get_tiling_inputs()["sample"]).latent_dist.mode()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            model.decode(latents)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            output = model.decode(latents).sample
        for replay in range(3):
            latents.copy_(torch.randn(latents.shape, generator=generator))
            graph.replay()
            expected = model.decode(latents).sample
            assert_tensors_close(output, expected, atol=0, rtol=0, msg=f"Replay {replay} differs from eager.")
""",
        ),
        imports=("assert_tensors_close", "require_torch_gpu"),
    ),
    "AutoencoderKLKVAE": TilingBlendCase(
        {},
        inputs=_sample("(2, 3, 64, 64)"),
        init='return {**super().get_init_dict(), "sample_size": 24}',
        reason=_SAMPLE_SIZE,
        overrides=(_SIZE_GRID,),
    ),
    "ConsistencyDecoderVAE": TilingBlendCase(
        {},
        inputs=_sample("(2, 3, 64, 64)"),
        init='return {**super().get_init_dict(), "sample_size": 24}',
        reason=_SAMPLE_SIZE,
        overrides=(
            _SIZE_GRID,
            """\
def get_tiling_blend_shapes(self, model):
    # The consistency decoder does not tile: only the encoder's tiles are blended.
    return {"encode": super().get_tiling_blend_shapes(model)["encode"]}
""",
        ),
    ),
    "AutoencoderKLHunyuanVideo": TilingBlendCase(
        _spatial(40, 16) | _frames(16, 4),
        inputs=_sample("(1, 3, 17, 48, 48)"),
        reason=_FITS,
        methods=_WITH_FRAMES,
    ),
    "AutoencoderKLLTXVideo": TilingBlendCase(_spatial(20, 8), inputs=_sample("(1, 3, 9, 24, 24)"), reason=_FITS),
    "AutoencoderKLMochi": TilingBlendCase(_spatial(40, 16), inputs=_sample("(1, 3, 7, 48, 48)"), reason=_FITS),
    "AutoencoderKLWan": TilingBlendCase(_spatial(40, 16), inputs=_sample("(1, 3, 9, 48, 48)"), reason=_FITS),
    "AutoencoderKLCogVideoX": TilingBlendCase(
        _overlap(40, 0.6), inputs=_sample("(1, 3, 8, 48, 48)"), reason=_FITS, overrides=(_OVERLAP_GRID,)
    ),
    "AutoencoderKLLTX2Video": TilingBlendCase(
        _spatial(40, 16),
        inputs=_sample("(1, 3, 9, 48, 48)"),
        init='return {**super().get_init_dict(), "spatial_compression_ratio": 8, "temporal_compression_ratio": 8}',
        reason="The tiled passes size their tiles by the compression ratios, which default to "
        "`2 ** sum(spatio_temporal_scaling)` = 16, but the tiny config's `downsample_type` makes its blocks downsample "
        "8x in space and in time (`test_tiny_config_downsamples_8x`).",
        overrides=(
            """\
def test_tiny_config_downsamples_8x(self):
    sample = self.get_tiling_inputs()["sample"]
    with torch.no_grad():
        model = self.model_class(**super().get_init_dict()).to(torch_device)
        latents = model.encode(sample).latent_dist.mode()
    assert sample.shape[-1] // latents.shape[-1] == 8
    assert (sample.shape[2] - 1) // (latents.shape[2] - 1) == 8
""",
        ),
    ),
    "AutoencoderKLMagvit": TilingBlendCase(
        _spatial(40, 16),
        inputs=_sample("(1, 3, 9, 48, 48)"),
        reason=_FITS + " Its group norms need tiles of 16 pixels at least.",
    ),
    "AutoencoderVidTok": TilingBlendCase(
        _overlap(64, 0.75),
        inputs=_sample("(1, 3, 16, 80, 80)"),
        reason="One video of 80x80 frames, so that 64-pixel tiles overlap, instead of the config's four 32x32 ones.",
        overrides=(_OVERLAP_GRID, _VIDTOK_SHAPES),
    ),
    "LTX2VideoDiffusionDecoderModel": TilingBlendCase(
        _spatial(64, 16),
        inputs="z = randn_tensor((1, 8, 2, 5, 5), generator=self.generator, device=torch_device)\n"
        'return {"z": z, "generator": self.generator}',
        reason="One video of 5x5 latents, so that 64-pixel tiles overlap, instead of the config's two of 3x3.",
        overrides=(
            """\
def get_tiling_blend_shapes(self, model):
    # The model only decodes: its tiles are blended into the decoded video.
    batch, _, frames, height, width = self.get_tiling_inputs()["z"].shape
    frames = (frames - 1) * model.temporal_compression_ratio + 1
    ratio = model.spatial_compression_ratio
    return {"decode": (batch, self.output_shape[0], frames, height * ratio, width * ratio)}
""",
        ),
    ),
}
"""Per class: the tile settings, inputs and geometry overrides with which its tests blend overlapping tiles."""
