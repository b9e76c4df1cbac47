"""Tiled encode/decode parity of diffusers' `AutoencoderKLQwenImage21` (autoencoder_kl_qwenimage21.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderKLQwenImage21Tiling(TiledParityTesterMixin):
    entry = MODELS["qwenimage21"]
