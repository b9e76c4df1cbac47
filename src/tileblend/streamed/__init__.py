"""The row-streamed tiled decode: diffusers' tiled decode, bit for bit, without holding every tile at once.

A stock tiled decode keeps all decoded tiles, the blended rows and the output alive together (about four times the
output, before any activation); the streamed one keeps the output, two tiles and the overlap rows of the tile row
above. Turn it on for every covered class with `tileblend.enable(streamed_decode=True)` (or `tileblend run
--streamed-decode`), or for one model with `with tileblend.streamed_decode(vae): ...`.

Modules: `walk` (the one row-streaming walk), `families` (each covered family's layout and tile calls), `source`
(which `tiled_decode` sources are covered, by digest) and `install` (the class-wide switch and the per-model block).
"""

from .install import streamed_classes, streamed_decode
from .source import COVERED


__all__ = ["COVERED", "streamed_classes", "streamed_decode"]
