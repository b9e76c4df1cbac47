"""Tiled encode/decode parity of diffusers' `AutoencoderKLHunyuanImageRefiner` (autoencoder_kl_hunyuanimage_refiner.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderKLHunyuanImageRefinerTiling(TiledParityTesterMixin):
    entry = MODELS["hunyuanimage-refiner"]
