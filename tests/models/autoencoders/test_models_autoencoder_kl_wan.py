"""Tiled encode/decode parity of diffusers' `AutoencoderKLWan` (autoencoder_kl_wan.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderKLWanTiling(TiledParityTesterMixin):
    entry = MODELS["wan"]
