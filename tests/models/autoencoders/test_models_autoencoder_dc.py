"""Tiled encode/decode parity of diffusers' `AutoencoderDC` (autoencoder_dc.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderDCTiling(TiledParityTesterMixin):
    entry = MODELS["dc"]
