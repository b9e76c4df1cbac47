"""Tiled encode/decode parity of diffusers' `AutoencoderKLKVAE` (autoencoder_kl_kvae.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderKLKVAETiling(TiledParityTesterMixin):
    entry = MODELS["kvae"]
