"""Tiled encode/decode parity of diffusers' `AutoencoderKLHunyuanVideo` (autoencoder_kl_hunyuan_video.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestAutoencoderKLHunyuanVideoTiling(TiledParityTesterMixin):
    entry = MODELS["hunyuan-video"]
