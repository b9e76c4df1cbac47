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
  with 64-px tiles (stride 48): 5D video seams at a size a CPU decodes in half precision (its half-precision 3D
  convolutions are very slow: the full-size `wan` preset is sized for a GPU).

`--model ID_OR_PATH` (with `--subfolder`, e.g. `vae`) decodes with a real checkpoint instead: diffusers'
`from_pretrained` of the autoencoder class its config names, in `--dtype`, with the model's own tile settings unless
`--tile` is given. Real-size inputs by default: 2048x2048 for an image VAE (SDXL's VAE tiles at 1024 px, so a
1024x1024 decode is one tile and blends nothing), 81 frames at 480x832 for a video VAE
(`--size 720x1280`, `--frames`). For example `--model stabilityai/sdxl-vae`,
`--model stable-diffusion-v1-5/stable-diffusion-v1-5 --subfolder vae`, or
`--model Wan-AI/Wan2.1-T2V-1.3B-Diffusers --subfolder vae`.

This module is also the worker: `python -m tileblend.bench.decode --arm A|B --config JSON ...` (see the protocol).
"""

import argparse
import inspect
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import arguments
from ..blend import DTYPES
from . import protocol
from .hub import hub_reachable
from .options import add_benchmark_parser, worker_config
from .records import WorkerConfig
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
CHECKPOINT_IMAGE_SIZE = (2048, 2048)
"""The default output of `--model` with an image VAE: 2 x 2 tiles of SDXL's VAE (its `sample_size`, the tile, is 1024;
SD's is 512), where the seams are real."""
CHECKPOINT_VIDEO_SIZE, CHECKPOINT_VIDEO_FRAMES = (480, 832), 81
"""The default output of `--model` with a video VAE: Wan 2.1's 480p clip of 81 frames."""

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
    """A preset's VAE with seeded random weights on `device` in `dtype`, with tiling on and `tile`-pixel tiles."""
    from diffusers import AutoencoderKL, AutoencoderKLWan

    torch.manual_seed(seed)
    if name in ("wan", "wan-small"):
        vae = AutoencoderKLWan(**SMALL_WAN_CONFIG) if name == "wan-small" else AutoencoderKLWan()
    else:
        vae = AutoencoderKL(**(SD_VAE_CONFIG if name == "sd" else SMALL_VAE_CONFIG))
    enable_tiling(vae, tile)
    return vae.to(device, dtype).eval()


def load_vae(config: dict, device: torch.device, dtype: torch.dtype):
    """The checkpoint `config["model"]` (a Hub ID or a local path; `config["subfolder"]`) loaded with `from_pretrained`
    of its class `config["vae"]` (found by `checkpoint_class`), on `device` in `dtype`, with tiling on: the model's own
    tile settings, or `config["tile"]`-pixel tiles."""
    import diffusers

    cls = getattr(diffusers, config["vae"])
    vae = cls.from_pretrained(config["model"], subfolder=config["subfolder"], torch_dtype=dtype)
    enable_tiling(vae, config["tile"])
    return vae.to(device).eval()


def checkpoint_class(model: str, subfolder: str | None) -> str:
    """The name of the autoencoder class the config of checkpoint `model` names.

    Raises:
        ValueError: (one line) the config cannot be read (a missing path, said without asking the Hub; a Hub ID
            offline or without network, said as such), or its class is not a diffusers autoencoder with loop blends
            (one tiling cannot reach).

    A Hub ID is looked up only after a quick request to the Hub (`tileblend.bench.hub.hub_reachable`): when the Hub
    does not answer, only the local Hub cache is read, and `HF_HUB_OFFLINE=1` is set in this process's environment so
    that the benchmark's workers read that cache too instead of retrying the network.
    """
    import diffusers
    import huggingface_hub

    from ..patch import find_loop_blends

    where = f"{model} (subfolder {subfolder})" if subfolder else model
    # A path (absolute, relative to `.` or `~`, or deeper than a Hub ID's `owner/name`) is never a Hub ID: say it is
    # missing at once instead of asking the Hub.
    path = Path(model).expanduser()
    if not path.exists() and (model.startswith((".", "~")) or path.is_absolute() or len(path.parts) > 2):
        raise ValueError(f"no such path: {model}")
    offline = bool(huggingface_hub.constants.HF_HUB_OFFLINE)
    endpoint = huggingface_hub.constants.ENDPOINT
    unreachable = not offline and not path.exists() and not hub_reachable(endpoint)
    if unreachable:  # the local Hub cache only, here and in the workers, which start with this environment
        os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        with warnings.catch_warnings():  # huggingface_hub's deprecation of an argument diffusers passes
            warnings.filterwarnings("ignore", message="The `local_dir_use_symlinks` argument is deprecated")
            config = diffusers.AutoencoderKL.load_config(
                model, subfolder=subfolder, local_files_only=offline or unreachable
            )
    except (OSError, ValueError) as error:
        if unreachable:
            reason = (
                f"no network: the Hub ({endpoint}) does not answer, and it is not in the local Hub cache "
                "(HF_HUB_OFFLINE=1 skips the Hub and reads that cache only)"
            )
        elif offline:
            reason = "offline (HF_HUB_OFFLINE is set) and not in the local Hub cache"
        else:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"cannot read the config of {where}: {reason}") from error
    name = config.get("_class_name")
    cls = getattr(diffusers, str(name), None)
    if not isinstance(cls, type) or not find_loop_blends([cls])[0]:
        raise ValueError(f"{where}: its config names {name}, not a diffusers autoencoder with tiled blends")
    return name


def enable_tiling(vae, tile: int | None) -> None:
    """Turn tiling on: the model's own settings, or `tile`-pixel tiles. An `AutoencoderKL`-style VAE keeps its overlap
    factor (0.25); the VAEs with per-axis settings (`AutoencoderKLWan`...) get a stride of 3/4 of the tile."""
    if tile is None:
        vae.enable_tiling()
    elif hasattr(vae, "tile_sample_min_size"):
        vae.enable_tiling()
        vae.tile_sample_min_size = tile
        vae.tile_latent_min_size = tile // compression(vae)[0]
    else:
        stride = tile * 3 // 4
        vae.enable_tiling(
            tile_sample_min_height=tile,
            tile_sample_min_width=tile,
            tile_sample_stride_height=stride,
            tile_sample_stride_width=stride,
        )


SPATIAL_KEYS = ("scale_factor_spatial", "spatial_compression_ratio")
TEMPORAL_KEYS = ("scale_factor_temporal", "temporal_compression_ratio")
"""The config entries that hold a VAE's compression factors (Wan's names, then LTX's and HunyuanVideo's)."""


def is_video_vae(name: str) -> bool:
    """Whether the diffusers autoencoder class `name` takes a temporal compression factor (a video VAE)."""
    import diffusers

    return any(key in inspect.signature(getattr(diffusers, name)).parameters for key in TEMPORAL_KEYS)


def compression(vae) -> tuple[int, int | None]:
    """The spatial and temporal (None for an image VAE) compression factors of `vae`, from its config. An image VAE
    without a spatial entry (`AutoencoderKL`) halves the size once per block but the last."""
    config = vae.config
    spatial = next((config[key] for key in SPATIAL_KEYS if key in config), None)
    temporal = next((config[key] for key in TEMPORAL_KEYS if key in config), None)
    return spatial or 2 ** (len(config.block_out_channels) - 1), temporal


def latent_shape(vae, size: tuple[int, int], frames: int | None) -> tuple[int, ...]:
    """The latent shape that decodes to `size` (height, width) pixels, and `frames` frames for a video VAE."""
    spatial, temporal = compression(vae)
    channels = vae.config.get("latent_channels") or vae.config.get("z_dim")
    height, width = size[0] // spatial, size[1] // spatial
    if frames is None:
        return (1, channels, height, width)
    return (1, channels, (frames - 1) // temporal + 1, height, width)


def build_model(config: WorkerConfig, device: torch.device, dtype: torch.dtype):
    """The decoded VAE of a worker config: the checkpoint `model` of its workload, or the preset VAE `vae`."""
    if config.workload["model"]:
        return load_vae(config.workload, device, dtype)
    return build_vae(config.workload["vae"], config.workload["tile"], device, dtype, config.seed)


def build_workload(config: WorkerConfig):
    """The worker's measured call: one tiled decode of seeded random latents; returns the decoded sample."""
    device, dtype = torch.device(config.device), DTYPES[config.dtype]
    vae = build_model(config, device, dtype)
    generator = torch.Generator().manual_seed(config.seed + 1)
    latents = torch.randn(latent_shape(vae, config.workload["size"], config.workload["frames"]), generator=generator)
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
    parser.add_argument(
        "--frames",
        type=arguments.positive_int,
        help="frames of the clip, video VAEs only (default: the preset's, or 81)",
    )
    parser.add_argument("--model", metavar="ID_OR_PATH", help="decode with this checkpoint instead of a preset")
    parser.add_argument("--subfolder", help="the checkpoint's subfolder holding the VAE (e.g. vae)")


def workload_config(args: argparse.Namespace) -> dict:
    """The decoded workload: `args.preset`'s VAE, size, frames and tile, or with `--model` the checkpoint (its class
    read from its config) at real size with its own tiles; overridden by `--size`, `--frames` and `--tile`.

    Raises:
        ValueError: `--frames` with an image VAE, `--subfolder` without `--model`, or a checkpoint `checkpoint_class`
            refuses.
    """
    if getattr(args, "model", None):
        vae = checkpoint_class(args.model, args.subfolder)
        if is_video_vae(vae):
            size, frames, tile = CHECKPOINT_VIDEO_SIZE, CHECKPOINT_VIDEO_FRAMES, None
        else:
            size, frames, tile = CHECKPOINT_IMAGE_SIZE, None, None
        source = {"preset": None, "model": args.model, "subfolder": args.subfolder, "vae": vae}
    else:
        if getattr(args, "subfolder", None):
            raise ValueError("--subfolder applies to --model only")
        preset = PRESETS[args.preset]
        size, frames, tile = (preset.size, preset.size), preset.frames, preset.tile
        source = {"preset": args.preset, "model": None, "subfolder": None, "vae": preset.vae}
    if args.frames is not None and frames is None:
        raise ValueError(f"--frames applies to video VAEs only, not {source['preset'] or source['vae']}")
    return source | {"size": list(args.size or size), "frames": args.frames or frames, "tile": args.tile or tile}


def describe(config: dict) -> str:
    """The workload in words: preset or checkpoint, frames, size and tiles."""
    if config.get("model"):
        source = f"checkpoint {config['model']} ({config['vae']})"
    else:
        source = f"random-weight preset {config['preset']}"
    clip = f"{config['frames']} frames of " if config["frames"] else ""
    tiles = f"{config['tile']}-px tiles" if config["tile"] else "the model's own tiles"
    return f"{source}, {clip}{config['size'][0]}x{config['size'][1]}, {tiles}"


def check_output_fits(config: WorkerConfig) -> None:
    """Raise ValueError, saying what it would need, when the decoded output alone (3 channels, the config's size and
    frames, its dtype) is larger than the memory available on the config's device (CUDA: free device memory; CPU:
    MemAvailable of /proc/meminfo, unchecked where that file is missing)."""
    device = torch.device(config.device)
    frames, (height, width) = config.workload["frames"] or 1, config.workload["size"]
    needed = 3 * frames * height * width * DTYPES[config.dtype].itemsize
    if device.type == "cuda":
        available = torch.cuda.mem_get_info(device)[0]
    else:
        meminfo = Path("/proc/meminfo")
        lines = meminfo.read_text().splitlines() if meminfo.is_file() else []
        kib = [int(line.split()[1]) for line in lines if line.startswith("MemAvailable:")]
        if not kib:
            return
        available = kib[0] * 1024
    if needed > available:
        raise ValueError(
            f"the decoded output alone would take {needed / 2**30:.1f} GiB and {device.type} has "
            f"{available / 2**30:.1f} GiB available: use a smaller --size or --frames"
        )


def main(args: argparse.Namespace) -> int:
    """Run the decode benchmark; returns 1 if arm A and arm B decode to different bits, 2 on a usage error."""
    try:
        config = worker_config(args, workload_config(args))
        check_output_fits(config)
    except ValueError as error:
        print(f"tileblend bench decode: {error}", file=sys.stderr)
        return 2
    title = f"tileblend bench decode: {describe(config.workload)}, {args.dtype} on {args.device}"
    return protocol.run_benchmark("decode", WORKER_MODULE, title, config, args)


if __name__ == "__main__":
    sys.exit(worker_main(build_workload))
