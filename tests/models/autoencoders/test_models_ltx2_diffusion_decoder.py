"""Tiled encode/decode parity of diffusers' `LTX2VideoDiffusionDecoderModel` (ltx2_diffusion_decoder.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestLTX2VideoDiffusionDecoderModelTiling(TiledParityTesterMixin):
    entry = MODELS["ltx2-diffusion-decoder"]
