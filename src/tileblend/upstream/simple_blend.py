"""`make exact-vs-simple`: how far the simple vectorized blend lands from the loop on a real-size tiled decode.

The coordination issue asks the maintainers to choose between the exact blend (the loop's bits) and the simple one,
`a * (1 - w) + b * w` with the weights `w` in the tile's dtype, as `AutoencoderKLMiniMaxH3._blend` computes. This
measures the difference on the CPU, for each workload (`WORKLOADS`: SD v1's VAE decoding 1024x1024 in 512- and in
768-pixel tiles, Wan 2.1's decoding 17 frames of 480x832, seeded random weights) in float16 and bfloat16: one tiled decode with the exact blend whose
decoder outputs are recorded, then the same decode with the simple blend, the recorded decoder outputs replayed, so
that the blends are the only difference. Reported: the largest absolute difference and the share of output values
that differ.

The decoders of the real-size workloads run once in float32 and their outputs are cast to the dtype before blending,
because half-precision convolutions are slow on a CPU: the blends, the part compared, run in the dtype. The SD rows
are those the coordination issue's `exact_vs_simple.py` (`tileblend/upstream/scripts/`) reruns with diffusers alone.
"""

import argparse
import contextlib
import json
import sys
from dataclasses import dataclass

import torch
from tqdm import tqdm

from .. import arguments, blend
from ..output import OutputError, writing
from ..patch import wrapped_methods


@dataclass(frozen=True)
class Workload:
    """A tiled decode: the `tileblend.bench.decode` preset VAE, its latent shape and tile, and whether its decoder runs
    in float32 with its outputs cast to the dtype (`cast`) or in the dtype."""

    vae: str
    latent_shape: tuple[int, ...]
    tile: int
    cast: bool
    title: str


WORKLOADS = {
    "sd": Workload("sd", (1, 4, 128, 128), 512, cast=True, title="SD v1 VAE, 1024x1024, 512-pixel tiles"),
    # SD 2's VAE tiles at its sample_size of 768: overlaps of 192 pixels, not a power of two.
    "sd-768": Workload("sd", (1, 4, 128, 128), 768, cast=True, title="SD v1 VAE, 1024x1024, 768-pixel tiles"),
    "wan": Workload("wan", (1, 16, 5, 60, 104), 256, cast=True, title="Wan 2.1 VAE, 17 frames of 480x832"),
    "small": Workload("small", (1, 4, 48, 48), 64, cast=False, title="small SD-like VAE, 384x384 (tests)"),
    "wan-small": Workload("wan-small", (1, 16, 2, 32, 32), 64, cast=True, title="small Wan VAE, 5 frames (tests)"),
}
DTYPES = ("float16", "bfloat16")


def simple_blend(a: torch.Tensor, b: torch.Tensor, blend_extent: int, dim: int) -> torch.Tensor:
    """The blend with the weights in the tile's dtype: `b`'s first rows along `dim` become
    `a_rows * (1 - w) + b_rows * w`, `w = arange(n) / n` in `b.dtype`, in place; returns `b`."""
    blend_extent = min(a.shape[dim], b.shape[dim], blend_extent)
    if blend_extent <= 0:
        return b
    shape = [1] * b.ndim
    shape[dim] = blend_extent
    weight = (torch.arange(blend_extent, device=b.device, dtype=b.dtype) / blend_extent).view(shape)
    seam = b.narrow(dim, 0, blend_extent)
    seam.copy_(a.narrow(dim, a.shape[dim] - blend_extent, blend_extent) * (1 - weight) + seam * weight)
    return b


@contextlib.contextmanager
def blends_of(cls: type, simple: bool):
    """Inside the block, `cls`'s blend methods are tileblend's exact ones, or `simple_blend` with `simple`."""

    def wrap(cls, name, function):
        exact, dim = getattr(blend, name), blend.BLEND_AXES[name]
        if simple:
            return lambda self, a, b, blend_extent: simple_blend(a, b, blend_extent, dim)
        return lambda self, a, b, blend_extent: exact(a, b, blend_extent)

    methods = [(cls, name) for name in blend.BLEND_AXES if hasattr(cls, name)]
    with wrapped_methods(methods, wrap):
        yield


@contextlib.contextmanager
def recorded_decoder(vae, outputs: list, dtype: torch.dtype, replay: bool):
    """Inside the block, `vae.decoder` returns its outputs cast to `dtype` and appends them to `outputs`, or, with
    `replay`, returns the recorded `outputs` in order without running."""
    forward = vae.decoder.forward
    replayed = iter(outputs)

    def record(*args, **kwargs):
        if replay:
            return next(replayed).clone()  # the blends write into the tiles they are given
        outputs.append(forward(*args, **kwargs).to(dtype))
        return outputs[-1].clone()

    vae.decoder.forward = record
    try:
        yield
    finally:
        del vae.decoder.forward


def compare(workload: Workload, dtype: torch.dtype, seed: int = 0) -> dict:
    """The exact and the simple tiled decode of `workload` in `dtype`: max absolute difference, share of values that
    differ, and the output's element count."""
    from ..bench.decode import build_vae

    vae = build_vae(workload.vae, workload.tile, torch.device("cpu"), torch.float32 if workload.cast else dtype, seed)
    generator = torch.Generator().manual_seed(seed)
    latents = torch.randn(workload.latent_shape, generator=generator).to(vae.dtype)
    outputs, decoded = [], {}
    for simple in (False, True):
        with torch.no_grad(), blends_of(type(vae), simple), recorded_decoder(vae, outputs, dtype, replay=simple):
            decoded[simple] = vae.decode(latents).sample.to(dtype)
    difference = (decoded[True].float() - decoded[False].float()).abs()
    return {
        "workload": workload.title,
        "dtype": str(dtype).removeprefix("torch."),
        "max_abs_difference": difference.max().item(),
        "changed_share": (difference > 0).float().mean().item(),
        "values": difference.numel(),
        "decoder_dtype": "float32, cast" if workload.cast else str(dtype).removeprefix("torch."),
    }


def table(results: list[dict]) -> str:
    """The results as a Markdown table."""
    lines = [
        "| tiled decode (random weights, CPU) | dtype | decoder | max abs difference | values changed |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    for result in results:
        lines.append(
            f"| {result['workload']} | {result['dtype']} | {result['decoder_dtype']} | "
            f"{result['max_abs_difference']:.3g} | {100 * result['changed_share']:.1f}% |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS), default=["sd", "sd-768", "wan"])
    parser.add_argument("--json", type=arguments.output_file, help="also write the results to this file")
    args = parser.parse_args(argv)
    runs = [(WORKLOADS[name], dtype) for name in args.workloads for dtype in DTYPES]
    results = []
    for workload, dtype in tqdm(runs, desc="exact vs simple", unit="decode pair"):
        results.append(compare(workload, blend.DTYPES[dtype]))
    command = "python utils/exact_vs_simple.py " + " ".join(["--workloads", *args.workloads])
    print(table(results))
    if args.json is not None:
        try:
            with writing(args.json) as path:
                path.write_text(
                    json.dumps({"command": command, "results": results}, indent=2) + "\n", encoding="utf-8"
                )
        except OutputError as error:
            print(f"exact-vs-simple: error: {error}", file=sys.stderr)
            return 2
    return 0
