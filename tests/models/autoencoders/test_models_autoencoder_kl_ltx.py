"""Tiled encode/decode parity of diffusers' `AutoencoderKLLTXVideo` (autoencoder_kl_ltx.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderKLLTXVideoTiling(TiledParityTesterMixin):
    entry = MODELS["ltx-video"]
