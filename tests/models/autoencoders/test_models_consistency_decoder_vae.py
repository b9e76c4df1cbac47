"""Tiled encode/decode parity of diffusers' `ConsistencyDecoderVAE` (consistency_decoder_vae.py) with tileblend, on the registry's tiny model."""

from tileblend.models import MODELS

from .tiling_mixin import TiledParityTesterMixin


class TestConsistencyDecoderVAETiling(TiledParityTesterMixin):
    entry = MODELS["consistency-decoder"]
