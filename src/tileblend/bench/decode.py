"""`tileblend bench decode`: tiled VAE decode with diffusers' loops (arm A) vs tileblend (arm B).

Both arms decode the same seeded random latents with the same seeded random weights, in fresh processes alternating
A B, B A, ... (`tileblend.bench.protocol`). Presets:

- `sd`: an SD-v1-size `AutoencoderKL` (block_out_channels 128/256/512/512, 2 layers per block, 4 latent channels,
  sample_size 512), 1024x1024 output, diffusers' default tiling (512-px tiles, overlap 0.25: 128-row seams).
- `wan`: a Wan-2.1-size `AutoencoderKLWan` (its defaults: base_dim 96, z_dim 16), a 5-frame 512x512 clip with spatial
  tiling (256-px tiles, stride 192).
- `small`: an `AutoencoderKL` with reduced channels and 64-px tiles, 384x384 output: finishes on a CPU in minutes
  and leaves the blends a visible share of the decode.
- `wan-small`: an `AutoencoderKLWan` with base_dim 8 (Wan-2.1's layout, 1/12 of its channels), a 5-frame 256x256 clip
  with 64-px tiles (stride 48): 5D video seams at a size a CPU decodes in half precision, where its missing
  half-precision convolution kernels make the full-size `wan` preset take hours.

This module is also the worker: `python -m tileblend.bench.decode --arm A|B --config JSON ...` (see the protocol).
"""

import argparse
import sys
from dataclasses import dataclass

import torch

from ..blend import DTYPES
from . import protocol
from .options import add_benchmark_parser, run_config
from .worker import worker_main


WORKER_MODULE = "tileblend.bench.decode"


@dataclass(frozen=True)
class Preset:
    """A decode workload: the VAE, the output size, the frames of a video VAE, and the tile size in pixels."""

    vae: str
    size: int
    frames: int | None
    tile: int


PRESETS = {
    "sd": Preset(vae="sd", size=1024, frames=None, tile=512),
    "wan": Preset(vae="wan", size=512, frames=5, tile=256),
    "small": Preset(vae="small", size=384, frames=None, tile=64),
    "wan-small": Preset(vae="wan-small", size=256, frames=5, tile=64),
}

SD_VAE_CONFIG = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "block_out_channels": [128, 256, 512, 512],
    "layers_per_block": 2,
    "latent_channels": 4,
    "norm_num_groups": 32,
    "sample_size": 512,
    "scaling_factor": 0.18215,
}
"""The architecture of Stable Diffusion v1's VAE (random weights here)."""

SMALL_VAE_CONFIG = SD_VAE_CONFIG | {"block_out_channels": [8, 16, 16, 16], "layers_per_block": 1, "norm_num_groups": 4}
"""SD-v1's VAE layout with 1/16 to 1/32 of its channels and one layer per block: cheap enough for a CPU."""

SMALL_WAN_CONFIG = {"base_dim": 8, "z_dim": 16}
"""Wan-2.1's VAE layout with 8 base channels instead of 96."""


def build_vae(name: str, tile: int, device: torch.device, dtype: torch.dtype, seed: int):
    """A VAE with seeded random weights on `device` in `dtype`, with tiling on and `tile`-pixel tiles.

    `AutoencoderKL` keeps its overlap factor (0.25); `AutoencoderKLWan` gets a stride of 3/4 of the tile.
    """
    from diffusers import AutoencoderKL, AutoencoderKLWan

    torch.manual_seed(seed)
    if name in ("wan", "wan-small"):
        vae = AutoencoderKLWan(**SMALL_WAN_CONFIG) if name == "wan-small" else AutoencoderKLWan()
        vae.enable_tiling(
            tile_sample_min_height=tile,
            tile_sample_min_width=tile,
            tile_sample_stride_height=tile * 3 // 4,
            tile_sample_stride_width=tile * 3 // 4,
        )
    else:
        vae = AutoencoderKL(**(SD_VAE_CONFIG if name == "sd" else SMALL_VAE_CONFIG))
        vae.enable_tiling()
        vae.tile_sample_min_size = tile
        vae.tile_latent_min_size = tile // 2 ** (len(vae.config.block_out_channels) - 1)
    return vae.to(device, dtype).eval()


def latent_shape(vae, size: int, frames: int | None) -> tuple[int, ...]:
    """The latent shape that decodes to `size` x `size` pixels (and `frames` frames for a video VAE)."""
    if frames is None:
        factor = 2 ** (len(vae.config.block_out_channels) - 1)
        return (1, vae.config.latent_channels, size // factor, size // factor)
    latent_frames = (frames - 1) // vae.config.scale_factor_temporal + 1
    factor = vae.config.scale_factor_spatial
    return (1, vae.config.z_dim, latent_frames, size // factor, size // factor)


def build_workload(config: dict):
    """The worker's measured call: one tiled decode of seeded random latents; returns the decoded sample."""
    device, dtype = torch.device(config["device"]), DTYPES[config["dtype"]]
    vae = build_vae(config["vae"], config["tile"], device, dtype, config["seed"])
    generator = torch.Generator().manual_seed(config["seed"] + 1)
    latents = torch.randn(latent_shape(vae, config["size"], config["frames"]), generator=generator)
    latents = latents.to(device, dtype)

    def decode():
        return vae.decode(latents).sample

    return decode


def add_parser(subparsers) -> None:
    parser = add_benchmark_parser(
        subparsers,
        "decode",
        "tiled VAE decode: diffusers' loops vs tileblend, in alternating fresh processes",
        __doc__,
        main,
    )
    protocol.add_protocol_arguments(parser, PRESETS, "output")
    parser.add_argument("--frames", type=int, help="frames of the clip, video presets only (default: the preset's)")


def workload_config(args: argparse.Namespace) -> dict:
    """The decoded workload: `args.preset`'s VAE, size, frames and tile, overridden by `--size`, `--frames` and
    `--tile`. Raises ValueError for `--frames` with an image preset."""
    preset = PRESETS[args.preset]
    if args.frames is not None and preset.frames is None:
        raise ValueError(f"--frames applies to video presets only, not {args.preset}")
    return {
        "preset": args.preset,
        "vae": preset.vae,
        "size": args.size or preset.size,
        "frames": args.frames or preset.frames,
        "tile": args.tile or preset.tile,
    }


def main(args: argparse.Namespace) -> int:
    """Run the decode benchmark; returns 1 if arm A and arm B decode to different bits."""
    try:
        config = workload_config(args) | run_config(args)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    clip = f"{config['frames']} frames of " if config["frames"] else ""
    title = (
        f"tileblend bench decode: preset {args.preset}, {clip}{config['size']}x{config['size']}, "
        f"{config['tile']}-px tiles, {args.dtype} on {args.device}"
    )
    return protocol.run_benchmark("decode", WORKER_MODULE, title, config, args)


if __name__ == "__main__":
    sys.exit(worker_main(build_workload))
