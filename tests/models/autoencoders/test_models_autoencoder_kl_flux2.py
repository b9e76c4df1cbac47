"""Tiled encode/decode parity of diffusers' `AutoencoderKLFlux2` (autoencoder_kl_flux2.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderKLFlux2Tiling(TiledParityTesterMixin):
    entry = MODELS["flux2"]
