"""Per rewritten class, what its test class sets so that its tiled forward blends overlapping tiles.

`CASES` maps a model class to its `TilingBlendCase` (`tileblend.upstream.test_text`): the `enable_tiling()` arguments,
where the mixin's default ones do not fit, and the input shape. Each input spans at least two tiles along the height
and the width of the tiled encode and the tiled decode, and at least one blend covers a number of rows that is not a
power of two (`tests/test_upstream_tiling_cases.py` checks both): an overlap of the settings, or, for the models whose
tile size is the config's `sample_size` and whose overlaps are powers of two, an edge tile the input size clips. Video
models take one frame, which their tiled forward tiles as it tiles every frame, except where frames are tiled too.
Measured on upstream main (2026-12).
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


def _overlap(tile: int, factor: float) -> dict:
    """`enable_tiling()` arguments of models that take an overlap factor instead of a stride."""
    return {
        "tile_sample_min_height": tile,
        "tile_sample_min_width": tile,
        "tile_overlap_factor_height": factor,
        "tile_overlap_factor_width": factor,
    }


# 32-pixel tiles every 24 pixels: the last of the 54-pixel input is 6 pixels, 3 latents, so its seams blend 6 and 3.
_CLIPPED_EDGE = (1, 3, 54, 54)
# The mixin's 40-pixel tiles every 16 pixels (a 24-pixel overlap, 3 latents at 8x) on a 48-pixel image or frame.
_IMAGE, _FRAME = (1, 3, 48, 48), (1, 3, 1, 48, 48)

CASES: dict[str, TilingBlendCase] = {
    "AutoencoderDC": TilingBlendCase(_IMAGE),
    "AutoencoderKL": TilingBlendCase(_CLIPPED_EDGE, {}),
    "AutoencoderKLKVAE": TilingBlendCase(_CLIPPED_EDGE, {}),
    "ConsistencyDecoderVAE": TilingBlendCase(_CLIPPED_EDGE, {}),
    # Frame tiles too (blend_t); the tiles are 16 pixels every 8 across the height, the mixin's across the width.
    "AutoencoderKLHunyuanVideo": TilingBlendCase(
        (1, 3, 9, 24, 48),
        {
            "tile_sample_min_height": 16,
            "tile_sample_min_width": 40,
            "tile_sample_stride_height": 8,
            "tile_sample_stride_width": 16,
            "tile_sample_min_num_frames": 8,
            "tile_sample_stride_num_frames": 4,
        },
    ),
    "AutoencoderKLLTXVideo": TilingBlendCase(_FRAME),
    "AutoencoderKLMochi": TilingBlendCase(_FRAME),
    "AutoencoderKLWan": TilingBlendCase(_FRAME),
    "AutoencoderKLMagvit": TilingBlendCase(_FRAME),
    "AutoencoderKLCogVideoX": TilingBlendCase(_FRAME, _overlap(40, 0.6)),
    # The tiny config downsamples 8x, its compression ratios say 16x: tiles of 56 every 32 pixels blend 16 and 24.
    "AutoencoderKLLTX2Video": TilingBlendCase(_FRAME, _spatial(56, 32)),
}
"""Per class: the tile settings and input shape with which its tiled forward blends overlapping tiles."""

TOO_LARGE = ("AutoencoderVidTok", "LTX2VideoDiffusionDecoderModel")
"""Rewritten classes with a test file but no test class: their tester configs make one tiled forward take tens of
seconds of CPU time (VidTok's 128-channel, five-level encoder; the diffusion decoder's denoising steps)."""
