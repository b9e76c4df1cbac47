"""Tiled encode/decode parity of diffusers' `AutoencoderKLQwenImage` (autoencoder_kl_qwenimage.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderKLQwenImageTiling(TiledParityTesterMixin):
    entry = MODELS["qwenimage"]
