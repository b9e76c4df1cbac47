"""The bugs in diffusers' tiled encode and decode paths that the vectorized blend leaves as they are.

Each `Bug` is one upstream issue: what a user sees, the one-line cause, the fix in words, the standalone script that
shows it (`tileblend.upstream.bugs.scripts`) and the error line that script ends with while the bug is there.
"""

from dataclasses import dataclass

from . import scripts


@dataclass(frozen=True)
class Bug:
    """One bug of one diffusers class, as its issue draft states it.

    Args:
        slug: a short name, also the draft's file name (`<slug>.md`).
        class_name: the diffusers class.
        title: the issue title.
        description: what goes wrong, as a user meets it.
        cause: the cause in one line, naming the method.
        fix: the fix in words.
        script: the repro script, torch and diffusers only.
        signature: the start of the last line the script prints when it fails on the bug (`ValueError: not enough
            values to unpack`, or its assertion's message): any other failure is not this bug.
    """

    slug: str
    class_name: str
    title: str
    description: str
    cause: str
    fix: str
    script: str
    signature: str


SHAPE_ASSERTION = "AssertionError: tiled {} returns the wrong shape"

BUGS: tuple[Bug, ...] = (
    Bug(
        slug="hunyuanimage-tiled-encode",
        class_name="AutoencoderKLHunyuanImage",
        title="AutoencoderKLHunyuanImage: tiled encode raises `ValueError: not enough values to unpack`",
        description="With tiling enabled, encoding any image larger than `tile_sample_min_size` raises "
        "`ValueError: not enough values to unpack (expected 5, got 4)`: tiled encode of this 2D image VAE cannot run.",
        cause="`tiled_encode` unpacks `_, _, _, height, width = x.shape` and slices and crops with five indices, but "
        "`_encode` passes it the 4D image batch `(B, C, H, W)`.",
        fix="Unpack `_, _, height, width = x.shape`, slice `x[:, :, i : i + tile, j : j + tile]` and crop "
        "`tile[:, :, :row_limit, :row_limit]`, as `tiled_decode` of the same class does, and say `(B, C, H, W)` in "
        "the docstring.",
        script=scripts.hunyuanimage_encode(),
        signature="ValueError: not enough values to unpack (expected 5, got 4)",
    ),
    Bug(
        slug="hunyuanimage-refiner-tiled-encode",
        class_name="AutoencoderKLHunyuanImageRefiner",
        title="AutoencoderKLHunyuanImageRefiner: tiled encode starts a tile every few pixels and raises",
        description="With tiling enabled, encoding a video wider or taller than `tile_sample_min_width`/"
        "`_height` raises a `RuntimeError` from a reshape in the encoder: the tiles start every "
        "`int(tile_latent_min_height * 0.75)` pixels (3 px for 64 px tiles, 12 px for the default 256 px ones), so "
        "an edge tile soon has a size the encoder cannot downsample.",
        cause="`tiled_encode` steps over the sample with `overlap_height = int(tile_latent_min_height * (1 - "
        "self.tile_overlap_factor))` (and the same for the width), a stride in latent pixels used on sample pixels.",
        fix="Compute `overlap_height` and `overlap_width` from `self.tile_sample_min_height` and "
        "`self.tile_sample_min_width`, as `AutoencoderKLHunyuanVideo15.tiled_encode` does; blend and crop stay in "
        "latent pixels.",
        script=scripts.hunyuanimage_refiner_encode(),
        signature="RuntimeError: shape '[",
    ),
    Bug(
        slug="hunyuanimage-refiner-tiled-decode",
        class_name="AutoencoderKLHunyuanImageRefiner",
        title="AutoencoderKLHunyuanImageRefiner: tiled decode returns a video of the latent's size",
        description="With tiling enabled, decoding a latent larger than a tile returns a video of the wrong size: "
        "each decoded tile is cut to as many pixels as its latent has rows and columns less the blend (3 for 64 px "
        "tiles), so a latent 2 x 5 decodes to a video 3 x 6 instead of 32 x 80.",
        cause="`tiled_decode` computes `blend_height`, `blend_width` and the row limits from `tile_latent_min_height`"
        " and `tile_latent_min_width` and applies them to the decoded tiles, which are in sample pixels (its own "
        "comments show the intended `256 * 0.25 = 64`).",
        fix="Compute `blend_height`, `blend_width` and the row limits from `self.tile_sample_min_height` and "
        "`self.tile_sample_min_width`, as `AutoencoderKLHunyuanVideo15.tiled_decode` does.",
        script=scripts.hunyuanimage_refiner_decode(),
        signature=SHAPE_ASSERTION.format("decode"),
    ),
    Bug(
        slug="hunyuanvideo15-tiled-encode",
        class_name="AutoencoderKLHunyuanVideo15",
        title="AutoencoderKLHunyuanVideo15: after enable_tiling(tile_sample_min_height=...), tiled encode returns a "
        "too large latent",
        description="`enable_tiling(tile_sample_min_height=64, tile_sample_min_width=64)` keeps "
        "`tile_latent_min_height`/`_width` at 16, derived from the 256 px default in `__init__`. Tiled encode then "
        "crops each tile to 12 latent pixels where the tiles are 3 apart, and keeps what overlaps: a 96 x 96 video "
        "encodes to a 7 x 7 latent instead of 6 x 6. The stale sizes also keep `decode` from tiling any latent of at "
        "most 16 x 16.",
        cause="`enable_tiling` does not derive `tile_latent_min_height`/`_width` from the sample tile sizes it is "
        "given, and `tiled_encode` has no final crop to the latent size, so the mismatch shows in the output.",
        fix="In `enable_tiling`, set `tile_latent_min_height`/`_width` to the sample sizes divided by "
        "`spatial_compression_ratio` unless they are given, as `__init__` does; end `tiled_encode` with a crop to "
        "`(height // spatial_compression_ratio, width // spatial_compression_ratio)`, as "
        "`AutoencoderKLHunyuanVideo.tiled_encode` does.",
        script=scripts.hunyuanvideo15_encode(),
        signature=SHAPE_ASSERTION.format("encode"),
    ),
    Bug(
        slug="magvit-tiled-encode",
        class_name="AutoencoderKLMagvit",
        title="AutoencoderKLMagvit: tiled encode keeps each tile whole, shifting every later tile",
        description="With tiling enabled, tiled encode returns a latent of the right shape but the wrong content: "
        "each tile is kept whole instead of up to where the next one starts, so every overlap appears twice and each "
        "later tile lands further off than the one before. With 32 px tiles every 24 px, the latent's last pixel is "
        "the last tile's pixel (1, 1) instead of its last, (2, 2).",
        cause="`tiled_encode` crops each blended tile to `[:latent_height, :latent_width]`, the size of the whole "
        "latent, instead of the latent stride; the final crop to the latent size hides the wrong shape.",
        fix="Crop each tile to `[:tile_latent_stride_height, :tile_latent_stride_width]`, as `tiled_decode` crops to "
        "the sample stride.",
        script=scripts.magvit_encode(),
        signature="AssertionError: tiled encode shifts the tiles after the first",
    ),
    *(
        Bug(
            slug=f"{name}-temporal-tiled-encode",
            class_name=class_name,
            title=f"{class_name}: `use_framewise_encoding` does not tile encode along time; "
            "`use_framewise_decoding` does",
            description="Setting `use_framewise_encoding = True` leaves encode of a long video in one piece: the "
            "encoder gets all 17 frames at once. Setting `use_framewise_decoding = True` instead tiles the encode "
            "along time (clips of 9, 9, 9, 5 and 1 frames).",
            cause="`_encode` calls `_temporal_tiled_encode` when `self.use_framewise_decoding` is set, not "
            "`self.use_framewise_encoding`.",
            fix="Test `self.use_framewise_encoding` in `_encode`.",
            script=scripts.temporal_encode(entry),
            signature="AssertionError: use_framewise_encoding does not tile the encode along time",
        )
        for name, class_name, entry in (
            ("ltx", "AutoencoderKLLTXVideo", "ltx-video"),
            ("ltx2", "AutoencoderKLLTX2Video", "ltx2-video"),
        )
    ),
)
