"""Per rewritten class, what its tiling-blend test class needs to reach the blends with upstream's tiny tester config.

`CASES` maps a model class to its `TilingBlendCase` (`tileblend.upstream.test_text`): the tile settings, where the
config's dummy inputs are too small for overlapping tiles the inputs, and the blend methods the tiled forward calls
(each one's effect on the output is what the added reach test checks). Measured on upstream main (2026-08).
"""

from .test_text import TilingBlendCase


_SPATIAL_12_8 = {
    "tile_sample_min_height": 12,
    "tile_sample_min_width": 12,
    "tile_sample_stride_height": 8,
    "tile_sample_stride_width": 8,
}
_SPATIAL_32_24 = {
    "tile_sample_min_height": 32,
    "tile_sample_min_width": 32,
    "tile_sample_stride_height": 24,
    "tile_sample_stride_width": 24,
}
_SIZE_16_8 = {"tile_sample_min_size": 16, "tile_latent_min_size": 8}
_FRAMEWISE = {"use_framewise_encoding": True, "use_framewise_decoding": True}
_WITH_FRAMES = ("blend_v", "blend_h", "blend_t")  # the tiled forward blends frames too


def _sample(shape: str) -> str:
    """The body of a `get_tiling_blend_inputs()` drawing one sample of `shape` from the config's generator."""
    return (
        f'sample = randn_tensor({shape}, generator=self.generator, device=torch_device)\nreturn {{"sample": sample}}'
    )


_TOO_SMALL = "the dummy video is too small for overlapping tiles at this compression."

CASES: dict[str, TilingBlendCase] = {
    "AutoencoderDC": TilingBlendCase(
        {
            "tile_sample_min_height": 16,
            "tile_sample_min_width": 16,
            "tile_sample_stride_height": 10,
            "tile_sample_stride_width": 10,
            "tile_latent_min_height": 8,
            "tile_latent_min_width": 8,
        }
    ),
    "AutoencoderKL": TilingBlendCase(_SIZE_16_8),
    "AutoencoderKLKVAE": TilingBlendCase(_SIZE_16_8),
    "ConsistencyDecoderVAE": TilingBlendCase(_SIZE_16_8),
    "AutoencoderKLHunyuanVideo": TilingBlendCase(
        _SPATIAL_12_8 | {"tile_sample_min_num_frames": 8, "tile_sample_stride_num_frames": 4}, methods=_WITH_FRAMES
    ),
    "AutoencoderKLLTXVideo": TilingBlendCase(
        {
            "tile_sample_min_height": 8,
            "tile_sample_min_width": 8,
            "tile_sample_stride_height": 4,
            "tile_sample_stride_width": 4,
            "tile_sample_min_num_frames": 8,
            "tile_sample_stride_num_frames": 4,
        }
        | _FRAMEWISE,
        methods=_WITH_FRAMES,
    ),
    "AutoencoderKLMochi": TilingBlendCase(_SPATIAL_12_8),
    "AutoencoderKLWan": TilingBlendCase(_SPATIAL_12_8),
    "AutoencoderKLCogVideoX": TilingBlendCase(
        {
            "tile_sample_min_height": 16,
            "tile_sample_min_width": 16,
            "tile_latent_min_height": 2,
            "tile_latent_min_width": 2,
            "tile_overlap_factor_height": 0.5,
            "tile_overlap_factor_width": 0.5,
        },
        inputs=_sample("(1, 3, 8, 32, 32)"),
        reason="32x32 frames: " + _TOO_SMALL,
    ),
    "AutoencoderKLLTX2Video": TilingBlendCase(
        _SPATIAL_32_24 | {"tile_sample_min_num_frames": 16, "tile_sample_stride_num_frames": 8} | _FRAMEWISE,
        init='return {**super().get_init_dict(), "spatial_compression_ratio": 8, "temporal_compression_ratio": 8}',
        inputs=_sample("(1, 3, 25, 48, 48)"),
        reason="The tiny config downsamples 8x in space and time, not its default ratios; "
        "25 frames of 48x48 span tiles.",
        methods=_WITH_FRAMES,
    ),
    "AutoencoderKLMagvit": TilingBlendCase(
        _SPATIAL_32_24, inputs=_sample("(1, 3, 9, 48, 48)"), reason="48x48 frames: " + _TOO_SMALL
    ),
    "AutoencoderVidTok": TilingBlendCase(
        {
            "tile_sample_min_height": 32,
            "tile_sample_min_width": 32,
            "tile_latent_min_height": 2,
            "tile_latent_min_width": 2,
            "tile_overlap_factor_height": 0.5,
            "tile_overlap_factor_width": 0.5,
        },
        init='return {**super().get_init_dict(), "ch": 4}',
        inputs=_sample("(1, 3, 16, 32, 32)"),
        reason="4 base channels and one video: bfloat16 3D convolutions are slow on a CPU.",
    ),
    "LTX2VideoDiffusionDecoderModel": TilingBlendCase(
        _SPATIAL_32_24,
        inputs="z = randn_tensor((1, 8, 2, 3, 3), generator=self.generator, device=torch_device)\n"
        'return {"z": z, "generator": self.generator}',
        reason="One latent video: each tiled decode denoises every tile, two videos double the time.",
    ),
}
"""Per class: the tile settings (and, where the config's dummy inputs are too small, the inputs) that reach its
blends with upstream's tiny config. Measured on upstream main (2026-08)."""
