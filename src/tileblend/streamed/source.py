"""Which classes the streamed decode covers: a class is covered when the `tiled_decode` it resolves to has, once
normalised, the source a streamed version was written for.

The normalised source is the method's syntax tree without its docstring (`ast.dump`: comments, blank lines, line
wrapping and the docstring do not count; any other change does); its digest is the first 16 hex digits of its SHA-256.
A class whose `tiled_decode` has another digest (an edited copy, another diffusers release, a user's subclass) is
refused by name and decodes as written.
"""

import ast
import functools
import hashlib
import inspect
import textwrap

from . import families


# Digest of the stock `tiled_decode` -> (the classes of diffusers 0.42.1 that have it, its streamed version).
FAMILIES = {
    "2252dc9daa35bd9c": (("AutoencoderKL", "AutoencoderKLFlux2"), families.kl),
    "d3a80e92e6e8163a": (("AutoencoderKLCogVideoX",), families.cogvideox),
    "8b977854aeab5a1d": (("AutoencoderKLWan",), families.wan),
    "5c664e95234725a9": (("AutoencoderKLQwenImage",), families.qwenimage),
    "bd44fcc12b74d1b6": (("AutoencoderKLQwenImage21",), families.qwenimage21),
    "78efe509988a3189": (("AutoencoderKLMochi",), families.mochi),
    "33666bc8711a7dcf": (("AutoencoderKLHunyuanVideo",), families.hunyuan_video),
    "0ed74c1fce6aee09": (("AutoencoderKLLTXVideo",), families.ltx),
    "f66fc9489ddc807d": (("AutoencoderKLLTX2Video",), families.ltx2),
    "9ce6f092d7ebf8d5": (("AutoencoderKLKVAE",), families.kvae),
    "f5e0376f05d6ffa5": (("AutoencoderKLHunyuanImage",), families.kvae),
    "964c4b847e31f625": (("AutoencoderDC",), families.dc),
    "964dcc696e59adb4": (("AutoencoderKLHunyuanVideo15",), families.hunyuanvideo15),
    "83e80ba260c12ab7": (("AutoencoderKLMagvit",), families.magvit),
}

COVERED = tuple(name for names, _ in FAMILIES.values() for name in names)


@functools.cache
def digest(function) -> str | None:
    """The digest of `function`'s normalised source, or None when it has no readable source."""
    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(function)))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return None
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        node.body = body[1:]
    node.decorator_list = []
    return hashlib.sha256(ast.dump(node).encode()).hexdigest()[:16]


def streamed_version(function):
    """The streamed replacement of the stock `tiled_decode` `function`, or None when tileblend knows no such source."""
    family = FAMILIES.get(digest(function))
    return None if family is None else family[1]
