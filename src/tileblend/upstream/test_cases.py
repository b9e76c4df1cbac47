"""Per rewritten class, what its tests need to cut upstream's tiny tester inputs into overlapping tiles.

`CASES` maps a model class to its `TilingBlendCase` (`tileblend.upstream.test_text`): the `enable_tiling()` arguments
and, where the config's dummy inputs fit in one tile, larger inputs, the blend methods its tiled passes call, and the
overrides of the mixin's geometry for models that name their tiling attributes or outputs otherwise. Every tile size and stride is a multiple of the
model's compression ratio, so that encoded and decoded tiles keep the grid. Measured on upstream main (2026-08).
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


CASES: dict[str, TilingBlendCase] = {
    "AutoencoderDC": TilingBlendCase(
        _spatial(16, 12),
        overrides=("# The encoder's output is the latent itself, without moments.\n" + _encoded_shapes(".latent"),),
    ),
    "AutoencoderKL": TilingBlendCase(
        {},
        inputs=_sample("(2, 3, 64, 64)"),
        reason="A 32x32 image " + _ONE_TILE,
        overrides=(
            _SIZE_GRID,
            """\
@require_torch_gpu
def test_tiled_decode_cuda_graph(self):
    model = self.get_tiled_model()[0].to("cuda")
    generator = torch.Generator("cpu").manual_seed(0)
    with torch.no_grad():
        latents = model.encode(self.get_tiling_inputs()["sample"].to("cuda")).latent_dist.mode()
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
        {}, inputs=_sample("(2, 3, 64, 64)"), reason="A 32x32 image " + _ONE_TILE, overrides=(_SIZE_GRID,)
    ),
    "ConsistencyDecoderVAE": TilingBlendCase(
        {},
        inputs=_sample("(2, 3, 64, 64)"),
        reason="A 32x32 image " + _ONE_TILE,
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
        _spatial(16, 8) | _frames(8, 4),
        inputs=_sample("(1, 3, 9, 24, 24)"),
        reason="A video of 16x16 frames " + _ONE_TILE,
        methods=_WITH_FRAMES,
    ),
    "AutoencoderKLLTXVideo": TilingBlendCase(_spatial(8, 4) | _frames(8, 4), methods=_WITH_FRAMES),
    "AutoencoderKLMochi": TilingBlendCase(
        _spatial(16, 8), inputs=_sample("(1, 3, 7, 24, 24)"), reason="A video of 16x16 frames " + _ONE_TILE
    ),
    "AutoencoderKLWan": TilingBlendCase(
        _spatial(16, 8), inputs=_sample("(1, 3, 9, 24, 24)"), reason="A video of 16x16 frames " + _ONE_TILE
    ),
    "AutoencoderKLCogVideoX": TilingBlendCase(
        _overlap(16, 0.5),
        inputs=_sample("(1, 3, 8, 24, 24)"),
        reason="A video of 16x16 frames " + _ONE_TILE,
        overrides=(_OVERLAP_GRID,),
    ),
    "AutoencoderKLLTX2Video": TilingBlendCase(
        _spatial(16, 8) | _frames(16, 8),
        inputs=_sample("(1, 3, 17, 24, 24)"),
        init='return {**super().get_init_dict(), "spatial_compression_ratio": 8, "temporal_compression_ratio": 8}',
        reason="The tiny config's blocks downsample 8x in space and in time, but its ratios default to the full "
        "model's, by which the tiled passes size their tiles (`test_tiny_config_downsamples_8x`).",
        methods=_WITH_FRAMES,
        overrides=(
            """\
def test_tiny_config_downsamples_8x(self):
    model = self.model_class(**super().get_init_dict())
    sample = self.get_tiling_inputs()["sample"]
    with torch.no_grad():
        latents = model.encode(sample).latent_dist.mode()
    ratios = (sample.shape[2] - 1) // (latents.shape[2] - 1), sample.shape[-1] // latents.shape[-1]
    assert ratios == (8, 8) != (model.temporal_compression_ratio, model.spatial_compression_ratio)
""",
        ),
    ),
    "AutoencoderKLMagvit": TilingBlendCase(
        _spatial(32, 16),
        inputs=_sample("(1, 3, 9, 48, 48)"),
        reason="A video of 16x16 frames " + _ONE_TILE + " Its group norms need tiles of 32 pixels at least.",
    ),
    "AutoencoderVidTok": TilingBlendCase(
        _overlap(32, 0.5),
        inputs=_sample("(1, 3, 16, 32, 32)"),
        reason="One video: the config's four take four times as long.",
        overrides=(
            _OVERLAP_GRID,
            "# The encoder returns the quantized latents and their indices.\n" + _encoded_shapes("[0]"),
        ),
    ),
    "LTX2VideoDiffusionDecoderModel": TilingBlendCase(
        _spatial(32, 16),
        overrides=(
            """\
def get_tiling_blend_shapes(self, model):
    # The model only decodes: its tiles are blended into the decoded video.
    return {"decode": (len(self.get_tiling_inputs()["z"]), *self.output_shape)}
""",
        ),
    ),
}
"""Per class: the tile settings, inputs and geometry overrides with which its tests blend overlapping tiles."""
