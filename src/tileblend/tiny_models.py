"""Tiny random-weight diffusers autoencoders whose tiled encode and decode really reach the blend methods.

One `ModelEntry` per diffusers autoencoder class with loop blends: a small config that builds in a second on the CPU,
the input shapes, and the tiling attributes that make tiled encode and tiled decode call `blend_v`, `blend_h` and
(where a path calls it) `blend_t`. Upstream's own tiling tests use inputs smaller than the default tiles, so they never
blend; these settings were chosen so that every declared blend runs, and each `TiledPath` states what must be seen:
the methods called, and whether an edge tile narrower than the overlap (a clipped extent) or an empty overlap (a zero
extent) occurs. Known upstream bugs in a tiled path are recorded with a one-line description; a path that raises is
skipped, a path that runs (even with a wrong result) is still checked for loop/vectorized parity.

Used by the tiled parity tests (`tests/test_models_tiled_parity.py`, one test class parametrized over `REGISTRY`),
`tileblend verify`, the parallel decode tests and the benchmarks.
"""

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import torch


@dataclass(frozen=True)
class TiledPath:
    """What tiled encode or tiled decode of an entry must show.

    Args:
        blends: the blend methods this path calls at least once with the entry's shapes and tiling.
        clipped: an edge tile narrower than the overlap occurs (a blend's extent is clamped below the requested one).
        zero: a blend with an effective extent of zero occurs (a no-op blend).
        upstream_bug: a one-line description of a diffusers bug in this path, or None.
        raises: the start of the error the upstream bug raises (`"ValueError: not enough values..."`), or None when
            the path runs; a path that raises is skipped.
    """

    blends: tuple[str, ...]
    clipped: bool = False
    zero: bool = False
    upstream_bug: str | None = None
    raises: str | None = None

    @property
    def runs(self) -> bool:
        return self.raises is None


@dataclass(frozen=True)
class ModelEntry:
    """A tiny configuration of one diffusers autoencoder class, with tiling settings that reach its blends.

    Args:
        name: a short name for the command line and test ids.
        class_name: the diffusers class, as exported by `diffusers`.
        init_kwargs: constructor arguments of the tiny random-weight model.
        sample_shape: the input of tiled encode.
        latent_shape: the input of tiled decode.
        encode: what tiled encode must show, or None when the class has no tiled encode.
        decode: what tiled decode must show, or None when the class has no tiled decode.
        tiling: keyword arguments of the class's `enable_tiling()` (tile sizes, strides, overlap factors).
        attributes: attributes set on the model after `enable_tiling()`, for settings it takes no argument for
            (`use_framewise_*`, tile sizes of classes whose `enable_tiling()` takes none).
        decode_uses_generator: decode draws noise and takes a `generator` (a diffusion decoder).

    `init_kwargs`, `tiling` and `attributes` are stored as read-only views of copies of the given dicts (entries
    written from shared module-level dicts share their values; `build_model` gives each model a deep copy).
    """

    name: str
    class_name: str
    init_kwargs: Mapping[str, Any]
    sample_shape: tuple[int, ...]
    latent_shape: tuple[int, ...]
    encode: TiledPath | None
    decode: TiledPath | None
    tiling: Mapping[str, Any] = field(default_factory=dict)
    attributes: Mapping[str, Any] = field(default_factory=dict)
    decode_uses_generator: bool = False

    def __post_init__(self):
        for name in ("init_kwargs", "tiling", "attributes"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def paths(self) -> dict[str, TiledPath]:
        """The entry's tiled paths by name ("encode", "decode"), including those an upstream bug stops."""
        return {name: path for name, path in (("encode", self.encode), ("decode", self.decode)) if path is not None}


SPATIAL = ("blend_v", "blend_h")
SPATIOTEMPORAL = ("blend_v", "blend_h", "blend_t")

# Spatial tiles of 32 px every 24 px, the setting of the classes that take tile sizes and strides in pixels.
SMALL_TILES = {
    "tile_sample_min_height": 32,
    "tile_sample_min_width": 32,
    "tile_sample_stride_height": 24,
    "tile_sample_stride_width": 24,
}
# The same, plus tiles of 8 frames every 4 frames, for the classes that also blend along time.
FRAME_TILES = SMALL_TILES | {"tile_sample_min_num_frames": 8, "tile_sample_stride_num_frames": 4}

KL_2D_TINY = {
    "block_out_channels": [2, 4],
    "norm_num_groups": 2,
    "latent_channels": 4,
    "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D"],
    "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D"],
    "sample_size": 32,
}

WAN_TINY = {
    "base_dim": 3,
    "z_dim": 16,
    "dim_mult": [1, 1, 1, 1],
    "num_res_blocks": 1,
    "temperal_downsample": [False, True, True],
}

REGISTRY: tuple[ModelEntry, ...] = (
    ModelEntry(
        "dc",
        "AutoencoderDC",
        {
            "latent_channels": 4,
            "attention_head_dim": 2,
            "encoder_block_types": ("ResBlock", "EfficientViTBlock"),
            "decoder_block_types": ("ResBlock", "EfficientViTBlock"),
            "encoder_block_out_channels": (8, 8),
            "decoder_block_out_channels": (8, 8),
            "encoder_qkv_multiscales": ((), (5,)),
            "decoder_qkv_multiscales": ((), (5,)),
            "encoder_layers_per_block": (1, 1),
            "decoder_layers_per_block": (1, 1),
            "downsample_block_type": "conv",
            "upsample_block_type": "interpolate",
        },
        tiling=SMALL_TILES,
        sample_shape=(1, 3, 64, 64),
        latent_shape=(1, 4, 32, 32),
        encode=TiledPath(SPATIAL),
        decode=TiledPath(SPATIAL),
    ),
    ModelEntry(
        "kl",
        "AutoencoderKL",
        KL_2D_TINY,
        sample_shape=(1, 3, 64, 64),
        latent_shape=(1, 4, 26, 26),
        encode=TiledPath(SPATIAL),
        decode=TiledPath(SPATIAL, clipped=True),
    ),
    ModelEntry(
        "cogvideox",
        "AutoencoderKLCogVideoX",
        {
            "block_out_channels": (8, 8, 8, 8),
            "latent_channels": 4,
            "layers_per_block": 1,
            "norm_num_groups": 2,
        },
        tiling={
            "tile_sample_min_height": 32,
            "tile_sample_min_width": 32,
            "tile_overlap_factor_height": 0.25,
            "tile_overlap_factor_width": 0.25,
        },
        sample_shape=(1, 3, 5, 48, 48),
        latent_shape=(1, 4, 2, 6, 6),
        encode=TiledPath(SPATIAL),
        decode=TiledPath(SPATIAL),
    ),
    ModelEntry(
        "flux2",
        "AutoencoderKLFlux2",
        KL_2D_TINY,
        sample_shape=(1, 3, 64, 64),
        latent_shape=(1, 4, 32, 32),
        encode=TiledPath(SPATIAL),
        decode=TiledPath(SPATIAL),
    ),
    ModelEntry(
        "hunyuan-video",
        "AutoencoderKLHunyuanVideo",
        {
            "latent_channels": 4,
            "block_out_channels": (8, 8, 8, 8),
            "layers_per_block": 1,
            "norm_num_groups": 4,
        },
        tiling=FRAME_TILES,
        sample_shape=(1, 3, 9, 48, 48),
        latent_shape=(1, 4, 3, 6, 6),
        encode=TiledPath(SPATIOTEMPORAL, zero=True),
        decode=TiledPath(SPATIOTEMPORAL, zero=True),
    ),
    ModelEntry(
        "hunyuanimage",
        "AutoencoderKLHunyuanImage",
        {
            "in_channels": 3,
            "out_channels": 3,
            "latent_channels": 4,
            "block_out_channels": (32, 32, 32, 32),
            "layers_per_block": 1,
            "spatial_compression_ratio": 8,
            "sample_size": 32,
        },
        tiling={"tile_sample_min_size": 96},
        sample_shape=(1, 3, 192, 192),
        latent_shape=(1, 4, 16, 16),
        encode=TiledPath(
            SPATIAL,
            upstream_bug="tiled_encode unpacks five dims from the 4D image batch and raises",
            raises="ValueError: not enough values to unpack (expected 5, got 4)",
        ),
        decode=TiledPath(SPATIAL),
    ),
    ModelEntry(
        "hunyuanimage-refiner",
        "AutoencoderKLHunyuanImageRefiner",
        {"latent_channels": 4, "block_out_channels": (16, 16, 16, 16, 16), "layers_per_block": 1},
        tiling={"tile_sample_min_height": 64, "tile_sample_min_width": 64},
        sample_shape=(1, 3, 1, 96, 96),
        latent_shape=(1, 4, 1, 6, 6),
        encode=TiledPath(
            SPATIAL,
            upstream_bug="tiled_encode raises",
            raises="RuntimeError: shape '[1, 4, 1, 1, 32, 2, 31, 2]' is invalid for input of size",
        ),
        decode=TiledPath(SPATIAL, upstream_bug="tiled_decode returns the wrong shape"),
    ),
    ModelEntry(
        "hunyuanvideo15",
        "AutoencoderKLHunyuanVideo15",
        {"latent_channels": 4, "block_out_channels": (16, 16, 16, 16, 16), "layers_per_block": 1},
        tiling={
            "tile_sample_min_height": 64,
            "tile_sample_min_width": 64,
            "tile_latent_min_height": 4,
            "tile_latent_min_width": 4,
        },
        sample_shape=(1, 3, 1, 96, 96),
        latent_shape=(1, 4, 1, 6, 6),
        encode=TiledPath(
            SPATIAL,
            upstream_bug="tiled_encode has no final crop and enable_tiling does not derive the latent tile sizes, so "
            "mismatched tile sizes give a too-large latent (not triggered by these settings)",
        ),
        decode=TiledPath(SPATIAL),
    ),
    ModelEntry(
        "kvae",
        "AutoencoderKLKVAE",
        {
            "channels": 32,
            "num_enc_blocks": 1,
            "num_dec_blocks": 1,
            "z_channels": 4,
            "ch_mult": (1, 2),
            "sample_size": 32,
        },
        sample_shape=(1, 3, 64, 64),
        latent_shape=(1, 4, 32, 32),
        encode=TiledPath(SPATIAL),
        decode=TiledPath(SPATIAL),
    ),
    ModelEntry(
        "ltx-video",
        "AutoencoderKLLTXVideo",
        {
            "latent_channels": 8,
            "block_out_channels": (8, 8, 8, 8),
            "decoder_block_out_channels": (8, 8, 8, 8),
            "layers_per_block": (1, 1, 1, 1, 1),
            "decoder_layers_per_block": (1, 1, 1, 1, 1),
            "spatio_temporal_scaling": (True, True, False, False),
            "decoder_spatio_temporal_scaling": (True, True, False, False),
            "decoder_inject_noise": (False, False, False, False, False),
            "upsample_residual": (False, False, False, False),
            "upsample_factor": (1, 1, 1, 1),
            "timestep_conditioning": False,
            "patch_size": 1,
            "patch_size_t": 1,
        },
        tiling=FRAME_TILES,
        attributes={"use_framewise_encoding": True, "use_framewise_decoding": True},
        sample_shape=(1, 3, 9, 48, 48),
        latent_shape=(1, 8, 3, 12, 12),
        encode=TiledPath(
            SPATIOTEMPORAL,
            zero=True,
            upstream_bug="temporal tiled encode is gated on use_framewise_decoding, not use_framewise_encoding",
        ),
        decode=TiledPath(SPATIOTEMPORAL, zero=True),
    ),
    ModelEntry(
        "ltx2-video",
        "AutoencoderKLLTX2Video",
        {
            "latent_channels": 8,
            "block_out_channels": (8, 8, 8, 8),
            "decoder_block_out_channels": (8, 8, 8),
            "layers_per_block": (1, 1, 1, 1, 1),
            "decoder_layers_per_block": (1, 1, 1, 1),
            "spatio_temporal_scaling": (True, True, False, False),
            "downsample_type": ("spatiotemporal", "spatiotemporal", "spatial", "spatial"),
            "decoder_spatio_temporal_scaling": (True, True, False),
            "decoder_inject_noise": (False, False, False, False),
            "upsample_residual": (False, False, False),
            "upsample_factor": (1, 1, 1),
            "patch_size": 1,
            "decoder_causal": False,
            "decoder_spatial_padding_mode": "zeros",
        },
        tiling=FRAME_TILES,
        attributes={"use_framewise_encoding": True, "use_framewise_decoding": True},
        sample_shape=(1, 3, 9, 48, 48),
        latent_shape=(1, 8, 3, 12, 12),
        encode=TiledPath(
            SPATIOTEMPORAL,
            zero=True,
            upstream_bug="temporal tiled encode is gated on use_framewise_decoding, not use_framewise_encoding",
        ),
        decode=TiledPath(SPATIOTEMPORAL, zero=True),
    ),
    ModelEntry(
        "magvit",
        "AutoencoderKLMagvit",
        {"latent_channels": 4, "block_out_channels": (8, 8, 8, 8), "layers_per_block": 1, "norm_num_groups": 8},
        tiling=SMALL_TILES,
        sample_shape=(1, 3, 5, 48, 48),
        latent_shape=(1, 4, 2, 6, 6),
        encode=TiledPath(SPATIAL, upstream_bug="tiled_encode crops each tile by the latent tile size, not the stride"),
        decode=TiledPath(SPATIAL),
    ),
    ModelEntry(
        "mochi",
        "AutoencoderKLMochi",
        {
            "latent_channels": 4,
            "encoder_block_out_channels": (32, 32, 32, 32),
            "decoder_block_out_channels": (32, 32, 32, 32),
            "layers_per_block": (1, 1, 1, 1, 1),
            "add_attention_block": (False, False, False, False, False),
        },
        tiling=SMALL_TILES,
        sample_shape=(1, 3, 1, 48, 48),
        latent_shape=(1, 4, 1, 6, 6),
        encode=TiledPath(SPATIAL),
        decode=TiledPath(SPATIAL),
    ),
    ModelEntry(
        "qwenimage",
        "AutoencoderKLQwenImage",
        WAN_TINY,
        tiling=SMALL_TILES,
        sample_shape=(1, 3, 1, 48, 48),
        latent_shape=(1, 16, 1, 6, 6),
        encode=TiledPath(SPATIAL),
        decode=TiledPath(SPATIAL),
    ),
    ModelEntry(
        "qwenimage21",
        "AutoencoderKLQwenImage21",
        {
            "base_dim": 4,
            "decoder_base_dim": 4,
            "z_dim": 4,
            "dim_mult": [1, 1, 1, 1, 1],
            "num_res_blocks": 1,
            "temperal_downsample": [False, True, True, True],
            "latents_mean": [0.0] * 4,
            "latents_std": [1.0] * 4,
        },
        tiling={
            "tile_sample_min_height": 64,
            "tile_sample_min_width": 64,
            "tile_sample_stride_height": 48,
            "tile_sample_stride_width": 48,
        },
        sample_shape=(1, 4, 1, 96, 96),
        latent_shape=(1, 4, 1, 6, 6),
        encode=TiledPath(SPATIAL),
        decode=TiledPath(SPATIAL),
    ),
    ModelEntry(
        "wan",
        "AutoencoderKLWan",
        WAN_TINY,
        tiling=SMALL_TILES,
        sample_shape=(1, 3, 5, 48, 48),
        latent_shape=(1, 16, 2, 6, 6),
        encode=TiledPath(SPATIAL),
        decode=TiledPath(SPATIAL),
    ),
    ModelEntry(
        "vidtok",
        "AutoencoderVidTok",
        {"ch": 8, "ch_mult": [1, 2, 2], "z_channels": 4, "num_res_blocks": 1},
        tiling={"tile_sample_min_height": 32, "tile_sample_min_width": 32, "tile_overlap_factor_height": 0.25},
        sample_shape=(1, 3, 9, 48, 48),
        latent_shape=(1, 4, 3, 12, 12),
        encode=TiledPath(SPATIAL, zero=True),
        decode=TiledPath(SPATIAL, zero=True),
    ),
    ModelEntry(
        "consistency-decoder",
        "ConsistencyDecoderVAE",
        {
            "latent_channels": 4,
            "encoder_block_out_channels": (4, 8),
            "encoder_down_block_types": ("DownEncoderBlock2D", "DownEncoderBlock2D"),
            "encoder_layers_per_block": 1,
            "encoder_norm_num_groups": 2,
            "decoder_block_out_channels": (8, 16),
            "decoder_down_block_types": ("ResnetDownsampleBlock2D", "ResnetDownsampleBlock2D"),
            "decoder_up_block_types": ("ResnetUpsampleBlock2D", "ResnetUpsampleBlock2D"),
            "decoder_layers_per_block": 1,
            "decoder_norm_num_groups": 4,
            "sample_size": 32,
        },
        sample_shape=(1, 3, 64, 64),
        latent_shape=(1, 4, 32, 32),
        encode=TiledPath(SPATIAL),
        decode=None,
    ),
    ModelEntry(
        "ltx2-diffusion-decoder",
        "LTX2VideoDiffusionDecoderModel",
        {
            "latent_channels": 8,
            "patch_size": 2,
            "decoder_head_dim": 8,
            "decoder_stage_channels": (32, 16, 8, 8, 8),
            "decoder_stage_depths": (1, 1, 1, 1, 2),
            "decoder_stage_kernels": ((3, 3, 3), (3, 3, 3), (3, 3, 3), (3, 3, 3)),
            "decoder_upsample_strides": ((1, 2, 2), (2, 1, 1), (2, 2, 2), (2, 2, 2)),
            "decoder_upsample_channel_reductions": (2, 2, 1, 1),
            "decoder_stage5_kernel": (3, 3, 3),
            "decoder_t_emb_dim": 32,
            "spatial_compression_ratio": 16,
            "temporal_compression_ratio": 8,
        },
        tiling=FRAME_TILES,
        sample_shape=(1, 3, 9, 48, 48),
        latent_shape=(1, 8, 2, 3, 3),
        encode=None,
        decode=TiledPath(SPATIOTEMPORAL),
        decode_uses_generator=True,
    ),
)

MODELS = {entry.name: entry for entry in REGISTRY}


def missing_class(entry: ModelEntry) -> str | None:
    """Why the installed diffusers cannot build `entry` ("AutoencoderKLKVAE is not in diffusers 0.36.0": a class added
    in a later release), or None when it has the class."""
    import diffusers

    if hasattr(diffusers, entry.class_name):
        return None
    return f"{entry.class_name} is not in diffusers {diffusers.__version__}"


def build_model(entry: ModelEntry, dtype: torch.dtype = torch.float32, device="cpu", seed: int = 0):
    """Build `entry`'s model with seeded random weights, in eval mode on `device` in `dtype`, with tiling enabled.

    The constructor gets a fresh deep copy of `entry.init_kwargs` (diffusers keeps the lists it is given in the model's
    config), so the model shares no object with the registry. `enable_tiling(**entry.tiling)` is called first, then
    every attribute of `entry.attributes` is set on the model.
    """
    import diffusers

    torch.manual_seed(seed)
    model = getattr(diffusers, entry.class_name)(**copy.deepcopy(dict(entry.init_kwargs)))
    model = model.to(device=device, dtype=dtype).eval()
    model.enable_tiling(**entry.tiling)
    for attribute, value in entry.attributes.items():
        setattr(model, attribute, value)
    return model


def make_input(entry: ModelEntry, path: str, dtype: torch.dtype = torch.float32, device="cpu", seed: int = 0):
    """A seeded random input for `path` ("encode": a sample, "decode": a latent), drawn in float32 on the CPU."""
    shape = entry.sample_shape if path == "encode" else entry.latent_shape
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator).to(device=device, dtype=dtype)


def run_path(model, entry: ModelEntry, path: str, x: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Run tiled `path` of `model` on `x` through its public `encode`/`decode` and return the output tensor.

    Encode returns the raw tiled moments where the output is a distribution (`latent_dist.parameters`), otherwise the
    latents; decode returns the decoded sample. A decoder that draws noise gets a generator seeded with `seed`.
    """
    with torch.no_grad():
        if path == "encode":
            return _tensor_of(model.encode(x))
        kwargs = (
            {"generator": torch.Generator(device=x.device).manual_seed(seed)} if entry.decode_uses_generator else {}
        )
        return _tensor_of(model.decode(x, **kwargs))


def _tensor_of(output) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, tuple):
        return _tensor_of(output[0])
    for attribute in ("latent_dist", "latent", "latents", "sample"):
        value = getattr(output, attribute, None)
        if value is not None:
            return getattr(value, "parameters", value)
    raise TypeError(f"no tensor in {type(output).__name__}")
