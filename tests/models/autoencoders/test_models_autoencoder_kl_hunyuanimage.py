"""Tiled encode/decode parity of diffusers' `AutoencoderKLHunyuanImage` (autoencoder_kl_hunyuanimage.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderKLHunyuanImageTiling(TiledParityTesterMixin):
    entry = MODELS["hunyuanimage"]
