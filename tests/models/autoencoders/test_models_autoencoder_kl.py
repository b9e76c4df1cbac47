"""Tiled encode/decode parity of diffusers' `AutoencoderKL` (autoencoder_kl.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderKLTiling(TiledParityTesterMixin):
    entry = MODELS["kl"]
