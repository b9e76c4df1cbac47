"""Tiled encode/decode parity of diffusers' `AutoencoderKLHunyuanVideo15` (autoencoder_kl_hunyuanvideo15.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderKLHunyuanVideo15Tiling(TiledParityTesterMixin):
    entry = MODELS["hunyuanvideo15"]
