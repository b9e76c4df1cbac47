"""Split a tiled VAE decode over the processes of torchrun, and check it against the single-device tiled decode.

    torchrun --nproc-per-node 2 examples/parallel_decode.py                  # CPU processes on gloo
    torchrun --nproc-per-node 4 examples/parallel_decode.py --device cuda    # one GPU per process on NCCL

Every process builds the same seeded random-weight AutoencoderKL and latents (with a real checkpoint,
`AutoencoderKL.from_pretrained` works the same way), computes its share of the tiles, and gets the whole decoded
image; the first process also decodes on its own and compares the bits.
"""

import argparse
import os

import torch
import torch.distributed as dist
from diffusers import AutoencoderKL

import tileblend
import tileblend.parallel
from tileblend.compare import bitwise_equal


SMALL = {
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "block_out_channels": [8, 16, 16, 16],
    "layers_per_block": 1,
    "norm_num_groups": 4,
    "sample_size": 64,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=256, help="output height and width in pixels")
    parser.add_argument("--device", default="cpu", help="cpu (gloo) or cuda (NCCL, one GPU per process)")
    args = parser.parse_args()

    device = torch.device(args.device)
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    tileblend.enable()

    torch.manual_seed(0)
    vae = AutoencoderKL(**SMALL).to(device).eval()
    vae.enable_tiling()
    latents = torch.randn(1, 4, args.size // 8, args.size // 8, generator=torch.Generator().manual_seed(1)).to(device)

    output, traffic = tileblend.parallel.decode(vae, latents, return_traffic=True)
    image = output.sample
    print(
        f"rank {dist.get_rank()}: {traffic.own_tiles} of {traffic.tiles} tiles, sent {traffic.sent} bytes, "
        f"received {traffic.received} bytes",
        flush=True,
    )
    if dist.get_rank() == 0:
        with torch.no_grad():
            single = vae.decode(latents).sample
        print(f"decoded {tuple(image.shape)} on {dist.get_world_size()} processes")
        print(f"bitwise equal to the single-device tiled decode: {'yes' if bitwise_equal(image, single) else 'NO'}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
