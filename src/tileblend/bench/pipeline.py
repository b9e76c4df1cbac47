"""`tileblend bench pipeline`: a whole StableDiffusionPipeline call with diffusers' loops (arm A) vs tileblend (B).

The pipeline is built from components with seeded random weights, so nothing is downloaded: an SD-v1-size
`UNet2DConditionModel` and `AutoencoderKL`, SD-v1's DDIM schedule, no text encoder, tokenizer or safety checker.
Each call passes seeded random prompt embeddings (1, 77, cross-attention dim), runs DDIM for 2 steps with guidance 1
at 1024x1024 and decodes with VAE tiling, and returns the image tensor. Same A/B process protocol as `bench decode`
(`tileblend.bench.protocol`). Presets: `sd` (the sizes above; meant for a GPU, runs on a CPU with a smaller --size
and --tile) and `small` (a small UNet and the `small` VAE of `bench decode`, 256x256, for CPUs and tests).

`--model ID_OR_PATH` runs a real text-to-image pipeline instead (diffusers' `DiffusionPipeline.from_pretrained`, in
`--dtype`, VAE tiling on with the VAE's own tile settings unless `--tile` is given), for example
`--model stable-diffusion-v1-5/stable-diffusion-v1-5`, prompted with a fixed text (seeded random prompt embeddings if it
has no text encoder), 1024x1024 unless `--size` is given.

This module is also the worker: `python -m tileblend.bench.pipeline --arm A|B --config JSON ...`.
"""

import argparse
import sys
from dataclasses import dataclass

import torch

from ..blend import DTYPES
from . import protocol
from .decode import CHECKPOINT_IMAGE_SIZE, build_vae, checkpoint_class, enable_tiling
from .options import add_benchmark_parser, worker_config
from .records import WorkerConfig
from .worker import worker_main


WORKER_MODULE = "tileblend.bench.pipeline"

SD_UNET_CONFIG = {
    "sample_size": 64,
    "in_channels": 4,
    "out_channels": 4,
    "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
    "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"],
    "block_out_channels": [320, 640, 1280, 1280],
    "layers_per_block": 2,
    "cross_attention_dim": 768,
    "attention_head_dim": 8,
    "norm_num_groups": 32,
}
"""The architecture of Stable Diffusion v1's UNet (random weights here)."""

SMALL_UNET_CONFIG = SD_UNET_CONFIG | {
    "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"],
    "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"],
    "block_out_channels": [32, 64],
    "layers_per_block": 1,
    "cross_attention_dim": 32,
}
"""A two-level UNet with SD-v1's block types and 1/10 or less of its channels."""

SD_SCHEDULER_CONFIG = {
    "beta_start": 0.00085,
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "clip_sample": False,
    "set_alpha_to_one": False,
    "steps_offset": 1,
}
"""Stable Diffusion v1's DDIM settings."""


@dataclass(frozen=True)
class Preset:
    """A pipeline workload: UNet config, VAE (a `bench decode` VAE name), image size and VAE tile size."""

    unet: dict
    vae: str
    size: int
    tile: int


PRESETS = {
    "sd": Preset(unet=SD_UNET_CONFIG, vae="sd", size=1024, tile=512),
    "small": Preset(unet=SMALL_UNET_CONFIG, vae="small", size=256, tile=64),
}


PROMPT = "a photograph of an astronaut riding a horse"
"""The prompt of a `--model` pipeline that has a text encoder."""


def load_pipeline(config: WorkerConfig, device: torch.device, dtype: torch.dtype):
    """The pipeline `config.workload["model"]` from `from_pretrained` on `device` in `dtype` (components it was saved
    without passed as None), VAE tiling on; and the prompt arguments of its calls (the fixed prompt, or seeded random
    embeddings for a pipeline without text encoder)."""
    from diffusers import DiffusionPipeline

    index = DiffusionPipeline.load_config(config.workload["model"])
    saved_as_none = {name: None for name, value in index.items() if isinstance(value, list) and value[0] is None}
    pipe = DiffusionPipeline.from_pretrained(config.workload["model"], torch_dtype=dtype, **saved_as_none).to(device)
    enable_tiling(pipe.vae, config.workload["tile"])
    if getattr(pipe, "text_encoder", None) is not None:
        return pipe, {"prompt": PROMPT}
    generator = torch.Generator().manual_seed(config.seed + 3)
    shape = (1, 77, pipe.unet.config.cross_attention_dim)
    return pipe, {"prompt_embeds": torch.randn(shape, generator=generator).to(device, dtype)}


def build_workload(config: WorkerConfig):
    """The worker's measured call: one seeded pipeline call; returns the image tensor."""
    from diffusers import DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel

    device, dtype = torch.device(config.device), DTYPES[config.dtype]
    if config.workload["model"]:
        pipe, prompt = load_pipeline(config, device, dtype)
        pipe.set_progress_bar_config(disable=True)
        return generate_call(pipe, prompt, config)
    preset = PRESETS[config.workload["preset"]]
    vae = build_vae(preset.vae, config.workload["tile"], device, dtype, config.seed)
    torch.manual_seed(config.seed + 2)
    unet = UNet2DConditionModel(**preset.unet).to(device, dtype).eval()
    pipe = StableDiffusionPipeline(
        vae=vae,
        text_encoder=None,
        tokenizer=None,
        unet=unet,
        scheduler=DDIMScheduler(**SD_SCHEDULER_CONFIG),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.set_progress_bar_config(disable=True)
    generator = torch.Generator().manual_seed(config.seed + 3)
    prompt_embeds = torch.randn((1, 77, unet.config.cross_attention_dim), generator=generator).to(device, dtype)
    return generate_call(pipe, {"prompt_embeds": prompt_embeds}, config)


def generate_call(pipe, prompt: dict, config: WorkerConfig):
    """The measured call: 2 steps at guidance 1 and the workload's size, seeded; returns the image tensor."""
    height, width = config.workload["size"]

    def generate():
        return pipe(
            **prompt,
            num_inference_steps=2,
            guidance_scale=1.0,
            height=height,
            width=width,
            generator=torch.Generator().manual_seed(config.seed + 4),
            output_type="pt",
        ).images

    return generate


def add_parser(subparsers) -> None:
    parser = add_benchmark_parser(
        subparsers,
        "pipeline",
        "StableDiffusionPipeline call (DDIM 2 steps, tiled VAE): diffusers' loops vs tileblend",
        __doc__,
        main,
    )
    protocol.add_protocol_arguments(parser, PRESETS, "image")
    parser.add_argument("--model", metavar="ID_OR_PATH", help="run this text-to-image pipeline instead of a preset")


def main(args: argparse.Namespace) -> int:
    """Run the pipeline benchmark; returns 1 if arm A and arm B produce different images, 2 on a usage error."""
    if args.model:
        try:
            vae = checkpoint_class(args.model, "vae")
        except ValueError as error:
            print(f"tileblend bench pipeline: {error}", file=sys.stderr)
            return 2
        workload = {"preset": None, "model": args.model, "vae": vae}
        workload |= {"size": list(args.size or CHECKPOINT_IMAGE_SIZE), "tile": args.tile}
        source, steps = f"checkpoint {args.model}", "2 steps"
    else:
        preset = PRESETS[args.preset]
        workload = {"preset": args.preset, "model": None}
        workload |= {"size": list(args.size or (preset.size, preset.size)), "tile": args.tile or preset.tile}
        source, steps = f"random-weight preset {args.preset}", "DDIM 2 steps"
    tiles = f"{workload['tile']}-px VAE tiles" if workload["tile"] else "the VAE's own tiles"
    title = (
        f"tileblend bench pipeline: {source}, {steps}, {workload['size'][0]}x{workload['size'][1]}, {tiles}, "
        f"{args.dtype} on {args.device}"
    )
    return protocol.run_benchmark("pipeline", WORKER_MODULE, title, worker_config(args, workload), args)


if __name__ == "__main__":
    sys.exit(worker_main(build_workload))
