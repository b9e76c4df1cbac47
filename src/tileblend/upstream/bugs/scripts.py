"""The standalone repro script of each upstream bug: torch and diffusers only, tiny random weights, seconds on a CPU.

Each script builds its model from the tiny config of `tileblend.tiny_models`, written out as keyword arguments, so
that a maintainer can paste it into `python -` and rerun it; the scripts `make upstream-bugs` runs are these texts.
A script prints `expected: ...`, then runs the tiled path and prints `observed: ...`, and fails (an exception, or an
`AssertionError` naming the bug) while the bug is there; it exits 0 once the bug is fixed.
"""

import json
from collections.abc import Mapping
from typing import Any

from tileblend.tiny_models import MODELS


LINE_LENGTH = 119  # diffusers' (its pyproject.toml): a call that fits is written on one line, as ruff formats it


def literal(value: Any) -> str:
    """`value` as formatted Python source: `repr`, but strings in double quotes, as ruff and black write them."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return f"[{', '.join(literal(item) for item in value)}]"
    if isinstance(value, tuple):
        return f"({', '.join(literal(item) for item in value)}{',' * (len(value) == 1)})"
    return repr(value)


def call(name: str, arguments: Mapping[str, Any], indent: str = "", around: int = 0) -> str:
    """`name(...)` on one line where that line fits in `LINE_LENGTH` characters with `around` more beside the call,
    else with one keyword argument per line, the continuation lines indented under `indent`, as ruff formats them."""
    short = f"{name}({', '.join(f'{key}={literal(value)}' for key, value in arguments.items())})"
    if len(indent) + len(short) + around <= LINE_LENGTH:
        return short
    lines = [f"{indent}    {key}={literal(value)}," for key, value in arguments.items()]
    return "\n".join([name + "(", *lines, f"{indent})"])


def model(entry_name: str) -> str:
    """The lines that build the tiny model of registry entry `entry_name` as `vae`, seeded, in eval mode."""
    entry = MODELS[entry_name]
    constructor = call(entry.class_name, entry.init_kwargs, around=len("vae = .eval()"))
    return f"torch.manual_seed(0)\nvae = {constructor}.eval()"


def header(entry_name: str) -> str:
    """The imports and the model: the start of every script."""
    return f"import torch\nfrom diffusers import {MODELS[entry_name].class_name}\n\n{model(entry_name)}\n"


def untiled_then_tiled(
    entry_name: str, path: str, shape: tuple[int, ...], tiling: Mapping[str, Any], what: str
) -> str:
    """A script comparing the shape of tiled `path` ("encode" or "decode") of `shape` with the untiled one's."""
    output = "latent_dist.mean" if path == "encode" else "sample"
    return f"""{header(entry_name)}x = torch.randn{shape}

with torch.no_grad():
    untiled = vae.{path}(x).{output}
    print("expected: {what} of shape", tuple(untiled.shape), "as without tiling")
    {call("vae.enable_tiling", tiling, "    ")}
    tiled = vae.{path}(x).{output}
    print("observed: {what} of shape", tuple(tiled.shape))
assert tiled.shape == untiled.shape, "tiled {path} returns the wrong shape"
"""


def hunyuanimage_encode() -> str:
    return untiled_then_tiled("hunyuanimage", "encode", (1, 3, 64, 64), {"tile_sample_min_size": 32}, "latent")


def hunyuanimage_refiner_encode() -> str:
    tiling = {"tile_sample_min_height": 64, "tile_sample_min_width": 64}
    return untiled_then_tiled("hunyuanimage-refiner", "encode", (1, 3, 1, 32, 80), tiling, "latent")


def hunyuanimage_refiner_decode() -> str:
    tiling = {"tile_sample_min_height": 64, "tile_sample_min_width": 64}
    return untiled_then_tiled("hunyuanimage-refiner", "decode", (1, 4, 1, 2, 5), tiling, "video")


def hunyuanvideo15_encode() -> str:
    tiling = {"tile_sample_min_height": 64, "tile_sample_min_width": 64}
    return untiled_then_tiled("hunyuanvideo15", "encode", (1, 3, 1, 96, 96), tiling, "latent")


def magvit_encode() -> str:
    """Tiles of 32 px every 24 px on a 48 px video: 2 x 2 tiles, latents of 4 px every 3 px, blended over 1 px. No
    blend reaches the last latent row and column, so there the tiled latent is the last tile's own last row and
    column, encoded alone."""
    tiling = {"tile_sample_min_height": 32, "tile_sample_min_width": 32}
    tiling |= {"tile_sample_stride_height": 24, "tile_sample_stride_width": 24}
    return f"""{header("magvit")}video = torch.randn(1, 3, 5, 48, 48)
{call("vae.enable_tiling", tiling)}

with torch.no_grad():
    tiled = vae.encode(video).latent_dist.mean
    vae.disable_tiling()
    last_tile = vae.encode(video[:, :, :, 24:, 24:]).latent_dist.mean  # the bottom-right tile, encoded alone
rows = last_tile.shape[-2]
same = [k for k in range(rows) if torch.equal(tiled[..., -1, -1], last_tile[..., k, k])]
print(f"expected: the last latent pixel is the last tile's last, ({{rows - 1}}, {{rows - 1}})")
print("observed: it is the last tile's", *[(k, k) for k in same] or ["none of them"])
assert same == [rows - 1], "tiled encode shifts the tiles after the first"
"""


def temporal_encode(entry_name: str) -> str:
    """17 frames with temporal tiles of 8 frames every 4: with either framewise flag alone, which tiles does the
    encoder see?"""
    tiling = {"tile_sample_min_num_frames": 8, "tile_sample_stride_num_frames": 4}
    return f"""{header(entry_name)}video = torch.randn(1, 3, 17, 16, 16)
{call("vae.enable_tiling", tiling)}
frames = []
vae.encoder.register_forward_pre_hook(lambda module, args: frames.append(args[0].shape[2]))


def encoder_inputs(use_framewise_encoding, use_framewise_decoding):
    vae.use_framewise_encoding = use_framewise_encoding
    vae.use_framewise_decoding = use_framewise_decoding
    frames.clear()
    with torch.no_grad():
        vae.encode(video)
    return list(frames)


encoding = encoder_inputs(use_framewise_encoding=True, use_framewise_decoding=False)
decoding = encoder_inputs(use_framewise_encoding=False, use_framewise_decoding=True)
print("expected: with use_framewise_encoding=True, the encoder gets clips of at most 9 frames")
print("observed: clips of", encoding, "frames; with use_framewise_decoding=True:", decoding)
assert max(encoding) <= 9, "use_framewise_encoding does not tile the encode along time"
"""
