"""Tiled encode and decode of tiny VAEs with whichever diffusers is importable; run as a script by test_rewrite.py.

    python tests/rewrite_tiled_outputs.py OUT.pt

Saves {case: {"latent", "decoded", "calls", "diffusers_file", "rewritten"}} to OUT.pt. `calls` counts the blend
calls per method name, so a parity test can prove the blends ran; `rewritten` says whether the blends imported are
the rewritten ones (they call `blend_tiles`).
"""

import inspect
import sys

import diffusers
import torch
from diffusers import AutoencoderKL, AutoencoderKLHunyuanVideo, AutoencoderKLWan


def tiny_models():
    """(name, model, input shape) with tile settings that reach every blend (4D, 5D and blend_t)."""
    torch.manual_seed(0)
    kl = AutoencoderKL(
        block_out_channels=[2, 4],
        norm_num_groups=2,
        latent_channels=4,
        down_block_types=["DownEncoderBlock2D"] * 2,
        up_block_types=["UpDecoderBlock2D"] * 2,
    )
    kl.enable_tiling()
    wan = AutoencoderKLWan(
        base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1, temperal_downsample=[False, True, True]
    )
    wan.enable_tiling(
        tile_sample_min_height=32, tile_sample_min_width=32, tile_sample_stride_height=24, tile_sample_stride_width=24
    )
    hunyuan = AutoencoderKLHunyuanVideo(
        block_out_channels=(8, 8, 8, 8),
        norm_num_groups=4,
        latent_channels=4,
        layers_per_block=1,
        spatial_compression_ratio=8,
        temporal_compression_ratio=4,
    )
    hunyuan.enable_tiling(
        tile_sample_min_height=32,
        tile_sample_min_width=32,
        tile_sample_min_num_frames=8,
        tile_sample_stride_height=24,
        tile_sample_stride_width=24,
        tile_sample_stride_num_frames=4,
    )
    return [("kl", kl, (1, 3, 64, 64)), ("wan", wan, (1, 3, 5, 64, 64)), ("hunyuan_video", hunyuan, (1, 3, 9, 64, 64))]


def count_calls(model) -> dict[str, int]:
    """Wrap the model's blend methods (on the instance) to count their calls."""
    calls = {}
    for name in ("blend_v", "blend_h", "blend_t"):
        if hasattr(model, name):
            method = getattr(model, name)

            def counted(a, b, blend_extent, name=name, method=method):
                calls[name] = calls.get(name, 0) + 1
                return method(a, b, blend_extent)

            setattr(model, name, counted)
    return calls


def tiled_outputs() -> dict:
    """Encode and decode each tiny model's input with tiling, one thread, counting the blend calls."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    results = {"diffusers_file": diffusers.__file__}
    for name, model, shape in tiny_models():
        model.eval()
        calls = count_calls(model)
        sample = torch.randn(shape, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            latent = model.encode(sample).latent_dist.mean
            decoded = model.decode(latent).sample
        results[name] = {
            "latent": latent,
            "decoded": decoded,
            "calls": calls,
            "rewritten": "blend_tiles" in inspect.getsource(type(model).blend_v),
        }
    torch.set_num_threads(threads)
    return results


if __name__ == "__main__":
    torch.save(tiled_outputs(), sys.argv[1])
