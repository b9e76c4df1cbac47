"""Tiled encode/decode parity of diffusers' `AutoencoderKLMagvit` (autoencoder_kl_magvit.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderKLMagvitTiling(TiledParityTesterMixin):
    entry = MODELS["magvit"]
