"""Tiled encode/decode parity of diffusers' `AutoencoderKLMochi` (autoencoder_kl_mochi.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderKLMochiTiling(TiledParityTesterMixin):
    entry = MODELS["mochi"]
