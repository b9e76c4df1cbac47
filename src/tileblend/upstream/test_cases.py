"""Per rewritten class, what its test class sets so that its tiled forward blends overlapping tiles.

`CASES` maps a model class to its `TilingBlendCase` (`tileblend.upstream.test_text`): the `enable_tiling()` arguments,
where it takes any, and the input shape. Each input spans at least two tiles along the height and the width of the
tiled encode and the tiled decode, and at least one blend covers a number of rows that is not a power of two
(`tests/test_upstream_tiling_cases.py` checks both): an overlap of the settings, or, for the models whose tile size
is the config's `sample_size` and whose overlaps are powers of two, an edge tile the input size clips. Measured on
upstream main (2026-08).
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

CASES: dict[str, TilingBlendCase] = {
    "AutoencoderDC": TilingBlendCase((1, 3, 32, 32), _spatial(16, 10)),
    "AutoencoderKL": TilingBlendCase(_CLIPPED_EDGE),
    "AutoencoderKLKVAE": TilingBlendCase(_CLIPPED_EDGE),
    "ConsistencyDecoderVAE": TilingBlendCase(_CLIPPED_EDGE),
    "AutoencoderKLHunyuanVideo": TilingBlendCase(
        (1, 3, 9, 48, 48), _spatial(40, 16) | {"tile_sample_min_num_frames": 8, "tile_sample_stride_num_frames": 4}
    ),
    "AutoencoderKLLTXVideo": TilingBlendCase((1, 3, 9, 24, 24), _spatial(20, 8)),
    "AutoencoderKLMochi": TilingBlendCase((1, 3, 7, 48, 48), _spatial(40, 16)),
    "AutoencoderKLWan": TilingBlendCase((1, 3, 9, 48, 48), _spatial(40, 16)),
    "AutoencoderKLCogVideoX": TilingBlendCase((1, 3, 8, 48, 48), _overlap(40, 0.6)),
    # The tiny config downsamples 8x, its compression ratios say 16x: tiles of 56 every 32 pixels blend 16 and 24.
    "AutoencoderKLLTX2Video": TilingBlendCase((1, 3, 9, 48, 48), _spatial(56, 32)),
    "AutoencoderKLMagvit": TilingBlendCase((1, 3, 9, 48, 48), _spatial(40, 16)),
}
"""Per class: the tile settings and input shape with which its tiled forward blends overlapping tiles."""

TOO_LARGE = ("AutoencoderVidTok", "LTX2VideoDiffusionDecoderModel")
"""Rewritten classes with a test file but no test class: their tester configs make one tiled forward take tens of
seconds of CPU time (VidTok's 128-channel, five-level encoder; the diffusion decoder's denoising steps)."""
