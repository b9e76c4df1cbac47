"""Tiled encode/decode parity of diffusers' `AutoencoderKLLTX2Video` (autoencoder_kl_ltx2.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderKLLTX2VideoTiling(TiledParityTesterMixin):
    entry = MODELS["ltx2-video"]
