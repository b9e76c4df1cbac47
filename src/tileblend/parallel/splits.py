"""How each diffusers autoencoder class's tiled pass splits into independent tiles, keyed by class name.

A `Split` names the callables of the model that compute one tile (the per-tile submodule, or methods of it), and how
the model's own pass marks where one tile ends and the next begins. Everything else (the tile grid, the order of the
tiles, the blends, the crops and the concatenation) stays the model's own code, run unchanged on every rank.

The facts behind each entry are in docs/parallel.md (one row per registry class), read from diffusers 0.42.1.
"""

import weakref
from dataclasses import dataclass


@dataclass(frozen=True)
class Split:
    """The per-tile calls of one tiled path, and how the model groups them into tiles.

    Args:
        travel: dotted paths from the model to the callables whose outputs are the tile's result: a submodule
            (`"decoder"`: its forward is intercepted) or a method of one (`"decoder.denoise"`). Their outputs are
            sent to the blending rank(s).
        owner_only: callables of the tile whose outputs feed only the tile's later calls (never sent).
        new_tile_after: a method of the model that resets the per-tile state (a causal cache): the next intercepted
            call starts a new tile.
        state_argument: a keyword argument that carries state from one call of a tile to the next: a call that
            gets None (or not at all) starts a new tile.
        new_tile_at: the path whose every call starts a new tile.

    With none of the last three, every intercepted call is a tile of its own.
    """

    travel: tuple[str, ...]
    owner_only: tuple[str, ...] = ()
    new_tile_after: str | None = None
    state_argument: str | None = None
    new_tile_at: str | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        return self.travel + self.owner_only


STATELESS_DECODE = Split(travel=("decoder",))
STATELESS_ENCODE = Split(travel=("encoder",))

SPLITS: dict[tuple[str, str], Split] = {
    ("AutoencoderDC", "decode"): STATELESS_DECODE,
    ("AutoencoderDC", "encode"): STATELESS_ENCODE,
    ("AutoencoderKL", "decode"): STATELESS_DECODE,
    ("AutoencoderKL", "encode"): STATELESS_ENCODE,
    ("AutoencoderKLCogVideoX", "decode"): Split(travel=("decoder",), state_argument="conv_cache"),
    ("AutoencoderKLCogVideoX", "encode"): Split(travel=("encoder",), state_argument="conv_cache"),
    ("AutoencoderKLFlux2", "decode"): STATELESS_DECODE,
    ("AutoencoderKLFlux2", "encode"): STATELESS_ENCODE,
    ("AutoencoderKLHunyuanVideo", "decode"): STATELESS_DECODE,
    ("AutoencoderKLHunyuanVideo", "encode"): STATELESS_ENCODE,
    ("AutoencoderKLHunyuanImage", "decode"): STATELESS_DECODE,
    ("AutoencoderKLHunyuanImageRefiner", "decode"): STATELESS_DECODE,
    ("AutoencoderKLHunyuanVideo15", "decode"): STATELESS_DECODE,
    ("AutoencoderKLHunyuanVideo15", "encode"): STATELESS_ENCODE,
    ("AutoencoderKLKVAE", "decode"): STATELESS_DECODE,
    ("AutoencoderKLKVAE", "encode"): STATELESS_ENCODE,
    ("AutoencoderKLLTXVideo", "decode"): STATELESS_DECODE,
    ("AutoencoderKLLTXVideo", "encode"): STATELESS_ENCODE,
    ("AutoencoderKLLTX2Video", "decode"): STATELESS_DECODE,
    ("AutoencoderKLLTX2Video", "encode"): STATELESS_ENCODE,
    ("AutoencoderKLMagvit", "decode"): Split(travel=("decoder",), new_tile_after="_clear_conv_cache"),
    ("AutoencoderKLMagvit", "encode"): Split(travel=("encoder",), new_tile_after="_clear_conv_cache"),
    ("AutoencoderKLMochi", "decode"): Split(travel=("decoder",), state_argument="conv_cache"),
    ("AutoencoderKLMochi", "encode"): STATELESS_ENCODE,
    ("AutoencoderKLQwenImage", "decode"): Split(travel=("decoder",), new_tile_after="clear_cache"),
    ("AutoencoderKLQwenImage", "encode"): Split(travel=("encoder",), new_tile_after="clear_cache"),
    ("AutoencoderKLQwenImage21", "decode"): Split(travel=("decoder",), new_tile_after="clear_cache"),
    ("AutoencoderKLQwenImage21", "encode"): Split(travel=("encoder",), new_tile_after="clear_cache"),
    ("AutoencoderKLWan", "decode"): Split(travel=("decoder",), new_tile_after="clear_cache"),
    ("AutoencoderKLWan", "encode"): Split(travel=("encoder",), new_tile_after="clear_cache"),
    ("ConsistencyDecoderVAE", "encode"): STATELESS_ENCODE,
}
"""(class name, "encode" or "decode") -> how that tiled path splits."""

UNSUPPORTED: dict[tuple[str, str], str] = {
    ("AutoencoderKLHunyuanImage", "encode"): "diffusers' tiled_encode raises (it unpacks five dims from the 4D batch)",
    ("AutoencoderKLHunyuanImageRefiner", "encode"): "diffusers' tiled_encode raises",
    ("ConsistencyDecoderVAE", "decode"): "its decode samples a consistency model over the whole latent: it has no "
    "tiled decode",
    ("LTX2VideoDiffusionDecoderModel", "decode"): "its tiles run FlexAttention, which the meta device (where the "
    "tiles are planned) cannot run",
    ("AutoencoderVidTok", "decode"): "its causal caches are set per chunk by `_set_first_chunk` and never emptied "
    "between tiles, so a tile's first chunk is not marked by a call the model makes once per tile",
    ("AutoencoderVidTok", "encode"): "its causal caches are set per chunk by `_set_first_chunk` and never emptied "
    "between tiles, so a tile's first chunk is not marked by a call the model makes once per tile",
}
"""(class name, path) -> why that tiled path is not split across ranks."""


DISPATCHERS: "weakref.WeakSet" = weakref.WeakSet()
"""The methods `tileblend.parallel.tiled` puts on a model's class while a block runs (`tileblend.parallel.scoped`):
they call the method the class had, so they override nothing."""


def split_of(model, path: str) -> Split:
    """The `Split` of `model`'s tiled `path` ("encode" or "decode"): that of its class, or of the nearest class in the
    table that it derives from, when no class in between defines a method of that path (a subclass that only adds
    methods of its own splits like its parent; the methods a running `tiled()` block installs do not count).

    Raises:
        NotImplementedError: the class is not in the table, a subclass overrides the path's methods, or its path
            cannot be split exactly (the reason is given).
    """
    mro = type(model).__mro__
    known = next((cls for cls in mro if (cls.__name__, path) in SPLITS or (cls.__name__, path) in UNSUPPORTED), None)
    if known is not None and known is not type(model):
        between = mro[: mro.index(known)]
        overridden = sorted(
            {
                name
                for cls in between
                for name, value in vars(cls).items()
                if (path in name or "tiled" in name) and value not in DISPATCHERS
            }
        )
        if overridden:
            raise NotImplementedError(
                f"tileblend.parallel cannot split {type(model).__name__}'s tiled {path}: it overrides "
                f"{', '.join(overridden)} of {known.__name__}"
            )
    name = (known or type(model)).__name__
    if (name, path) in SPLITS:
        return SPLITS[(name, path)]
    if (name, path) in UNSUPPORTED:
        raise NotImplementedError(
            f"tileblend.parallel cannot split {name}'s tiled {path}: {UNSUPPORTED[(name, path)]}"
        )
    raise NotImplementedError(
        f"tileblend.parallel has no split for {name}'s tiled {path}; the supported classes are listed in "
        "docs/parallel.md"
    )
