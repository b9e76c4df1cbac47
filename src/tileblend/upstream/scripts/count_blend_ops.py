"""aten ops dispatched by one `AutoencoderKL.blend_v` call at SD's default tiling (512-pixel tiles, 128 rows blended),
and the blend calls of a 1024x1024 tiled decode at those tiles (a tiny-channel AutoencoderKL: same tiles)."""

import torch
from diffusers import AutoencoderKL
from torch.utils._python_dispatch import TorchDispatchMode


class CountOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


a, b = torch.randn(1, 3, 512, 512), torch.randn(1, 3, 512, 512)
with CountOps() as counted:
    AutoencoderKL.blend_v(None, a, b, 128)
views = sum(op.is_view for op in counted.ops)
print(f"blend_v, 128 rows: {len(counted.ops)} aten ops, {len(counted.ops) - views} of them not views")


class CountedVAE(AutoencoderKL):
    calls = []

    def blend_v(self, a, b, blend_extent):
        self.calls.append(("blend_v", min(a.shape[2], b.shape[2], blend_extent)))
        return super().blend_v(a, b, blend_extent)

    def blend_h(self, a, b, blend_extent):
        self.calls.append(("blend_h", min(a.shape[3], b.shape[3], blend_extent)))
        return super().blend_h(a, b, blend_extent)


vae = CountedVAE(
    block_out_channels=[8] * 4,
    down_block_types=["DownEncoderBlock2D"] * 4,
    up_block_types=["UpDecoderBlock2D"] * 4,
    layers_per_block=1,
    norm_num_groups=4,
    sample_size=512,
).eval()
vae.enable_tiling()
with torch.no_grad():
    vae.decode(torch.randn(1, 4, 128, 128))
print("1024x1024 tiled decode, 512-pixel tiles:", {call: vae.calls.count(call) for call in sorted(set(vae.calls))})
