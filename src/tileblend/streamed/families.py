"""The streamed `tiled_decode` of each covered family of diffusers autoencoders: the stock layout of the tiles (a
`Grid`), the stock calls that decode one tile, and what the stock code does to the assembled output, around the one
walk of `tileblend.streamed.walk`.

Each function takes the arguments of the stock `tiled_decode` it replaces and returns what it returns; it was written
for the source whose digest (`tileblend.streamed.source.digest`) `FAMILIES` lists with it, and is installed only on a
class whose `tiled_decode` has that digest.
"""

import dataclasses

import torch

from .walk import Grid, decode_rows


def _result(decoded: torch.Tensor, return_dict: bool):
    from diffusers.models.autoencoders.vae import DecoderOutput

    return DecoderOutput(sample=decoded) if return_dict else (decoded,)


def _overlap_grid(latent: tuple[int, int], tile: tuple[int, int], sample: tuple[int, int], factor: tuple) -> Grid:
    """The layout of the classes with overlap factors: `latent` (height, width) cut into `tile`s of `sample` pixels,
    strides and extents rounded down from the overlap `factor`s, no final cut."""
    blend = [int(size * overlap) for size, overlap in zip(sample, factor)]
    return Grid(
        rows=range(0, latent[0], int(tile[0] * (1 - factor[0]))),
        cols=range(0, latent[1], int(tile[1] * (1 - factor[1]))),
        tile_height=tile[0],
        tile_width=tile[1],
        blend_height=blend[0],
        blend_width=blend[1],
        crop_height=sample[0] - blend[0],
        crop_width=sample[1] - blend[1],
    )


def _stride_grid(self, height: int, width: int, patch_size: int | None = None) -> Grid:
    """The layout of the classes with sample tile sizes and strides: the output cut to the latent's size times the
    spatial compression (divided by the patch size where the decoder outputs patches)."""
    ratio, patch = self.spatial_compression_ratio, patch_size or 1
    stride_height, stride_width = self.tile_sample_stride_height // patch, self.tile_sample_stride_width // patch
    return Grid(
        rows=range(0, height, self.tile_sample_stride_height // ratio),
        cols=range(0, width, self.tile_sample_stride_width // ratio),
        tile_height=self.tile_sample_min_height // ratio,
        tile_width=self.tile_sample_min_width // ratio,
        blend_height=self.tile_sample_min_height // patch - stride_height,
        blend_width=self.tile_sample_min_width // patch - stride_width,
        crop_height=stride_height,
        crop_width=stride_width,
        height=height * ratio // patch,
        width=width * ratio // patch,
    )


def kl(self, z: torch.Tensor, return_dict: bool = True):
    """AutoencoderKL and the classes sharing its tiled decode: `post_quant_conv` (if configured), then `decoder`."""
    size, sample, factor = self.tile_latent_min_size, self.tile_sample_min_size, self.tile_overlap_factor
    grid = _overlap_grid(z.shape[2:4], (size, size), (sample, sample), (factor, factor))

    def decode_tile(i, j):
        tile = z[:, :, i : i + size, j : j + size]
        if self.config.use_post_quant_conv:
            tile = self.post_quant_conv(tile)
        return self.decoder(tile)

    return _result(decode_rows(self, grid, decode_tile), return_dict)


def _plain_overlap(self, z: torch.Tensor) -> torch.Tensor:
    """The classes whose tiles are square, laid out by one overlap factor, and decoded by `decoder` alone."""
    size, sample, factor = self.tile_latent_min_size, self.tile_sample_min_size, self.tile_overlap_factor
    grid = _overlap_grid(z.shape[2:4], (size, size), (sample, sample), (factor, factor))
    return decode_rows(self, grid, lambda i, j: self.decoder(z[:, :, i : i + size, j : j + size]))


def kvae(self, z: torch.Tensor, return_dict: bool = True):
    """AutoencoderKLKVAE and AutoencoderKLHunyuanImage: square tiles, `decoder` alone."""
    return _result(_plain_overlap(self, z), return_dict)


def dc(self, z: torch.Tensor, return_dict: bool = True):
    """AutoencoderDC: tiles of sample sizes and strides, `decoder` alone, no final cut."""
    grid = dataclasses.replace(_stride_grid(self, z.shape[2], z.shape[3]), height=None, width=None)

    def decode_tile(i, j):
        return self.decoder(z[:, :, i : i + grid.tile_height, j : j + grid.tile_width])

    return _result(decode_rows(self, grid, decode_tile), return_dict)


def hunyuanvideo15(self, z: torch.Tensor):
    """AutoencoderKLHunyuanVideo15: tiles of its latent tile sizes laid out by its overlap factor, `decoder` alone;
    returns the tensor, as the stock method does."""
    height, width = self.tile_latent_min_height, self.tile_latent_min_width
    grid = _overlap_grid(
        z.shape[3:5],
        (height, width),
        (self.tile_sample_min_height, self.tile_sample_min_width),
        (self.tile_overlap_factor, self.tile_overlap_factor),
    )
    return decode_rows(self, grid, lambda i, j: self.decoder(z[:, :, :, i : i + height, j : j + width]))


def magvit(self, z: torch.Tensor, return_dict: bool = True):
    """AutoencoderKLMagvit: `post_quant_conv`, the first latent frame, then batches of latent frames, the conv cache
    cleared after each tile; the output cut to the latent's size times the compression."""
    grid = _stride_grid(self, z.shape[3], z.shape[4])

    def decode_tile(i, j):
        tile = self.post_quant_conv(z[:, :, :, i : i + grid.tile_height, j : j + grid.tile_width])
        time = [self.decoder(tile[:, :, :1, :, :])]
        for k in range(1, z.shape[2], self.num_latent_frames_batch_size):
            time.append(self.decoder(tile[:, :, k : k + self.num_latent_frames_batch_size, :, :]))
        decoded = torch.cat(time, dim=2)
        self._clear_conv_cache()
        return decoded

    return _result(decode_rows(self, grid, decode_tile), return_dict)


def cogvideox(self, z: torch.Tensor, return_dict: bool = True):
    """AutoencoderKLCogVideoX: each tile decoded in batches of latent frames, with the decoder's conv cache."""
    num_frames = z.shape[2]
    frame_batch_size = self.num_latent_frames_batch_size
    grid = _overlap_grid(
        z.shape[3:5],
        (self.tile_latent_min_height, self.tile_latent_min_width),
        (self.tile_sample_min_height, self.tile_sample_min_width),
        (self.tile_overlap_factor_height, self.tile_overlap_factor_width),
    )

    def decode_tile(i, j):
        conv_cache, time = None, []
        for k in range(max(num_frames // frame_batch_size, 1)):
            remaining_frames = num_frames % frame_batch_size
            start_frame = frame_batch_size * k + (0 if k == 0 else remaining_frames)
            end_frame = frame_batch_size * (k + 1) + remaining_frames
            tile = z[
                :, :, start_frame:end_frame, i : i + self.tile_latent_min_height, j : j + self.tile_latent_min_width
            ]
            if self.post_quant_conv is not None:
                tile = self.post_quant_conv(tile)
            tile, conv_cache = self.decoder(tile, conv_cache=conv_cache)
            time.append(tile)
        return torch.cat(time, dim=2)

    return _result(decode_rows(self, grid, decode_tile), return_dict)


def _causal_frames(first_chunk: bool, unpatchify, clamp: bool):
    """The Wan-style decode: each tile decoded frame by frame with a fresh feature cache (`first_chunk=` passed where
    the stock call passes it), then the output unpatchified (if the config has a patch size) and clamped to [-1, 1]
    (in place: the same values)."""

    def tiled_decode(self, z: torch.Tensor, return_dict: bool = True):
        patch_size = self.config.patch_size if unpatchify is not None else None
        grid = _stride_grid(self, z.shape[3], z.shape[4], patch_size)

        def decode_tile(i, j):
            self.clear_cache()
            time = []
            for k in range(z.shape[2]):
                self._conv_idx = [0]
                tile = z[:, :, k : k + 1, i : i + grid.tile_height, j : j + grid.tile_width]
                tile = self.post_quant_conv(tile)
                flags = {"first_chunk": k == 0} if first_chunk else {}
                time.append(self.decoder(tile, feat_cache=self._feat_map, feat_idx=self._conv_idx, **flags))
            return torch.cat(time, dim=2)

        decoded = decode_rows(self, grid, decode_tile)
        self.clear_cache()
        if patch_size is not None:
            decoded = unpatchify(decoded, patch_size=patch_size)
        if clamp:
            decoded.clamp_(min=-1.0, max=1.0)
        return _result(decoded, return_dict)

    return tiled_decode


def _wan_unpatchify(x, patch_size):
    from diffusers.models.autoencoders.autoencoder_kl_wan import unpatchify

    return unpatchify(x, patch_size=patch_size)


def _qwenimage21_unpatchify(x, patch_size):
    from diffusers.models.autoencoders.autoencoder_kl_qwenimage21 import _unpatchify

    return _unpatchify(x, patch_size=patch_size)


wan = _causal_frames(first_chunk=True, unpatchify=_wan_unpatchify, clamp=True)
wan.__doc__ = "AutoencoderKLWan: " + _causal_frames.__doc__
qwenimage21 = _causal_frames(first_chunk=True, unpatchify=_qwenimage21_unpatchify, clamp=True)
qwenimage21.__doc__ = "AutoencoderKLQwenImage21: " + _causal_frames.__doc__
qwenimage = _causal_frames(first_chunk=False, unpatchify=None, clamp=False)
qwenimage.__doc__ = "AutoencoderKLQwenImage: " + _causal_frames.__doc__


def mochi(self, z: torch.Tensor, return_dict: bool = True):
    """AutoencoderKLMochi: each tile decoded whole or in batches of latent frames with the conv cache, its first
    frames dropped where the stock code drops them."""
    grid = _stride_grid(self, z.shape[3], z.shape[4])

    def decode_tile(i, j):
        if self.use_framewise_decoding:
            time, conv_cache = [], None
            for k in range(0, z.shape[2], self.num_latent_frames_batch_size):
                frames = slice(k, k + self.num_latent_frames_batch_size)
                tile = z[:, :, frames, i : i + grid.tile_height, j : j + grid.tile_width]
                tile, conv_cache = self.decoder(tile, conv_cache=conv_cache)
                time.append(tile)
            time = torch.cat(time, dim=2)
        else:
            time, _ = self.decoder(z[:, :, :, i : i + grid.tile_height, j : j + grid.tile_width])
        if self.drop_last_temporal_frames and time.size(2) >= self.temporal_compression_ratio:
            time = time[:, :, self.temporal_compression_ratio - 1 :]
        return time

    return _result(decode_rows(self, grid, decode_tile), return_dict)


def hunyuan_video(self, z: torch.Tensor, return_dict: bool = True):
    """AutoencoderKLHunyuanVideo (the spatial tiling of one temporal chunk): `post_quant_conv`, then `decoder`."""
    grid = _stride_grid(self, z.shape[3], z.shape[4])

    def decode_tile(i, j):
        return self.decoder(self.post_quant_conv(z[:, :, :, i : i + grid.tile_height, j : j + grid.tile_width]))

    return _result(decode_rows(self, grid, decode_tile), return_dict)


def ltx(self, z: torch.Tensor, temb: torch.Tensor | None, return_dict: bool = True):
    """AutoencoderKLLTXVideo: `decoder(tile, temb)`."""
    grid = _stride_grid(self, z.shape[3], z.shape[4])

    def decode_tile(i, j):
        return self.decoder(z[:, :, :, i : i + grid.tile_height, j : j + grid.tile_width], temb)

    return _result(decode_rows(self, grid, decode_tile), return_dict)


def ltx2(self, z: torch.Tensor, temb: torch.Tensor | None, causal: bool | None = None, return_dict: bool = True):
    """AutoencoderKLLTX2Video: `decoder(tile, temb, causal=causal)`."""
    grid = _stride_grid(self, z.shape[3], z.shape[4])

    def decode_tile(i, j):
        return self.decoder(z[:, :, :, i : i + grid.tile_height, j : j + grid.tile_width], temb, causal=causal)

    return _result(decode_rows(self, grid, decode_tile), return_dict)
