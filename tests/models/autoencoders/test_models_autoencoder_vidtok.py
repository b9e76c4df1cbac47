"""Tiled encode/decode parity of diffusers' `AutoencoderVidTok` (autoencoder_vidtok.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderVidTokTiling(TiledParityTesterMixin):
    entry = MODELS["vidtok"]
