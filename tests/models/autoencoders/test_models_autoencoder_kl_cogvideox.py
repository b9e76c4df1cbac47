"""Tiled encode/decode parity of diffusers' `AutoencoderKLCogVideoX` (autoencoder_kl_cogvideox.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderKLCogVideoXTiling(TiledParityTesterMixin):
    entry = MODELS["cogvideox"]
