"""Enable tileblend and run a tiled VAE decode, then check it against diffusers' own loops, bit for bit.

    python examples/tiled_decode.py                    # small random-weight AutoencoderKL, 256x256, 64-px tiles
    python examples/tiled_decode.py --sd --size 1024   # SD-v1-size VAE with its default 512-px tiles (use a GPU)
    python examples/tiled_decode.py --model stabilityai/sdxl-vae --size 2048 --dtype float16   # a real checkpoint

By default the weights are random (seeded), so nothing is downloaded; `--model` (a Hub ID or a local folder, with
`--subfolder vae` for a pipeline repository) loads an `AutoencoderKL` checkpoint with `from_pretrained` instead.
"""

import argparse

import torch
from diffusers import AutoencoderKL

import tileblend
from tileblend.compare import bitwise_equal


SMALL = {"block_out_channels": [8, 16, 16, 16], "layers_per_block": 1, "norm_num_groups": 4, "sample_size": 64}
SD_V1 = {"block_out_channels": [128, 256, 512, 512], "layers_per_block": 2, "norm_num_groups": 32, "sample_size": 512}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sd", action="store_true", help="SD-v1-size VAE instead of the small one")
    parser.add_argument("--size", type=int, default=256, help="output height and width in pixels")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32")
    parser.add_argument("--model", help="an AutoencoderKL checkpoint: a Hub ID or a local folder")
    parser.add_argument("--subfolder", help="the checkpoint's subfolder holding the VAE (e.g. vae)")
    args = parser.parse_args()
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)

    torch.manual_seed(0)
    if args.model:
        vae = AutoencoderKL.from_pretrained(args.model, subfolder=args.subfolder, torch_dtype=dtype)
    else:
        blocks = {"down_block_types": ["DownEncoderBlock2D"] * 4, "up_block_types": ["UpDecoderBlock2D"] * 4}
        vae = AutoencoderKL(**blocks, **(SD_V1 if args.sd else SMALL))
    vae = vae.to(device, dtype).eval()
    vae.enable_tiling()  # tiles of config.sample_size pixels, overlapping by a quarter
    factor = 2 ** (len(vae.config.block_out_channels) - 1)
    latents = torch.randn(1, vae.config.latent_channels, args.size // factor, args.size // factor)
    latents = latents.to(device, dtype)

    with torch.inference_mode():
        loops = vae.decode(latents).sample  # diffusers as installed: blend_v / blend_h row loops
        with tileblend.enabled() as patched:  # or tileblend.enable() once, at the top of a script
            vectorized = vae.decode(latents).sample

    equal = bitwise_equal(loops, vectorized)
    print(f"tileblend patched {len(patched)} blend methods in diffusers")
    print(f"tiled decode {tuple(latents.shape)} -> {tuple(vectorized.shape)} on {device} in {args.dtype}")
    print(f"bitwise equal to diffusers' loops: {'yes' if equal else 'NO'}")
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
