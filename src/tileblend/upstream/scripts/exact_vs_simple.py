"""The tiled decode of an SD-v1-size AutoencoderKL (seeded random weights), 1024x1024 in 768-pixel tiles (`--tile`),
with the installed diffusers' blends against the simple form `a * (1 - w) + b * w`, `w` in the tile's dtype. The
decoder runs once per tile, in float32, and every decode replays those tiles cast to the dtype, so that the blends are
the only difference."""

import argparse

import torch
from diffusers import AutoencoderKL


class SimpleBlendVAE(AutoencoderKL):
    def blend_v(self, a, b, blend_extent):
        n = min(a.shape[2], b.shape[2], blend_extent)
        w = (torch.arange(n, dtype=b.dtype) / n).view(-1, 1)
        b[:, :, :n, :] = a[:, :, -n:, :] * (1 - w) + b[:, :, :n, :] * w
        return b

    def blend_h(self, a, b, blend_extent):
        n = min(a.shape[3], b.shape[3], blend_extent)
        w = torch.arange(n, dtype=b.dtype) / n
        b[:, :, :, :n] = a[:, :, :, -n:] * (1 - w) + b[:, :, :, :n] * w
        return b


class ReplayedDecoder(torch.nn.Module):
    """Runs `decoder` once per tile, in float32; every pass gets those tiles back, cast to `dtype`."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder, self.dtype, self.tiles, self.calls = decoder, torch.float32, [], 0

    def forward(self, z):
        if self.calls == len(self.tiles):
            self.tiles.append(self.decoder(z))
        self.calls += 1
        return self.tiles[self.calls - 1].to(self.dtype, copy=True)


parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--tile", type=int, default=768, help="tile size in pixels (default: 768)")
tile = parser.parse_args().tile
config = {
    "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "layers_per_block": 2,
    "latent_channels": 4,
    "sample_size": tile,
}
latents = torch.randn((1, 4, 128, 128), generator=torch.Generator().manual_seed(0))
replayed = None
for dtype in (torch.float16, torch.bfloat16):
    outputs = []
    for cls in (AutoencoderKL, SimpleBlendVAE):
        torch.manual_seed(0)
        vae = cls(**config).eval()
        vae.enable_tiling()
        if replayed is None:
            replayed = ReplayedDecoder(vae.decoder)
        replayed.calls, replayed.dtype = 0, dtype
        vae.decoder = replayed
        with torch.no_grad():
            outputs.append(vae.decode(latents).sample)
    difference = (outputs[0].float() - outputs[1].float()).abs()
    changed = (difference > 0).float().mean().item()
    print(
        f"{tile}-pixel tiles, {dtype}: max abs difference {difference.max().item():.3g}, values changed {changed:.1%}"
    )
