"""Time a tiled VAE encode and decode with stock diffusers, and save the outputs to compare two checkouts bit for bit.

This script imports only torch and diffusers. Run it once per checkout, in an environment with that checkout
installed (`pip install -e .`): first on main, then on the pull request's branch, then compare the two output files.

    python benchmark_tiled_vae.py --model stabilityai/sd-vae-ft-mse --output main.pt
    python benchmark_tiled_vae.py --model stabilityai/sd-vae-ft-mse --output pr.pt
    python benchmark_tiled_vae.py --compare main.pt pr.pt

Each run first says which diffusers and torch it imported. For a video VAE, pass --frames (e.g. `--model Wan-AI/Wan2.1-T2V-1.3B-Diffusers --subfolder vae --frames 17
--height 480 --width 832`). Each run prints the median and the spread of --repeats timed encodes and decodes (after
one warm-up) and, on CUDA, the peak memory of each; `--compare` exits 1 when the outputs differ.
"""

import argparse
import statistics
import sys
import time

import diffusers
import torch
from diffusers import AutoModel


def timed(function, repeats: int, device: torch.device):
    """The output of `function()`, the seconds of each of `repeats` calls after one warm-up, and the peak memory in
    bytes on CUDA (None elsewhere)."""
    output = function()
    seconds = []
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        output = function()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    return output, seconds, peak


def report(name: str, seconds: list[float], peak: int | None) -> str:
    memory = f", peak memory {peak / 2**30:.2f} GiB" if peak is not None else ""
    return (
        f"{name}: median {statistics.median(seconds) * 1000:.1f} ms over {len(seconds)} runs "
        f"(min {min(seconds) * 1000:.1f}, max {max(seconds) * 1000:.1f}){memory}"
    )


def compare(paths: list[str]) -> int:
    first, second = (torch.load(path) for path in paths)
    same = {name: torch.equal(first[name], second[name]) for name in ("latents", "sample")}
    for name, equal in same.items():
        print(f"{name}: {'identical' if equal else 'DIFFERENT'}")
    return 0 if all(same.values()) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="Hub id or local path of the VAE checkpoint")
    parser.add_argument("--subfolder", help="the checkpoint's subfolder holding the VAE, e.g. vae")
    parser.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float16")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--height", type=int, default=1024)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--frames", type=int, help="frames of the input video (video VAEs only)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", help="save the latents and the decoded sample to this file")
    parser.add_argument("--compare", nargs=2, metavar="FILE", help="compare two --output files bit for bit")
    args = parser.parse_args(argv)
    if args.compare:
        return compare(args.compare)
    if args.model is None:
        parser.error("--model is required unless --compare is given")

    print(f"diffusers {diffusers.__version__} from {diffusers.__path__[0]}, torch {torch.__version__}")
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    vae = AutoModel.from_pretrained(args.model, subfolder=args.subfolder, torch_dtype=dtype).to(device).eval()
    vae.enable_tiling()
    shape = (1, 3, args.frames, args.height, args.width) if args.frames else (1, 3, args.height, args.width)
    generator = torch.Generator("cpu").manual_seed(0)
    sample = torch.randn(shape, generator=generator).to(device, dtype)

    with torch.no_grad():
        latents, seconds, peak = timed(lambda: vae.encode(sample).latent_dist.mode(), args.repeats, device)
        print(report("tiled encode", seconds, peak))
        decoded, seconds, peak = timed(lambda: vae.decode(latents).sample, args.repeats, device)
        print(report("tiled decode", seconds, peak))
    if args.output:
        torch.save({"latents": latents.cpu(), "sample": decoded.cpu()}, args.output)
        print(f"outputs saved to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
