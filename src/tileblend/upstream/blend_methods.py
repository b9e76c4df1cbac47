"""The upstream text of the vectorized blend, generated from `tileblend.blend`'s own source.

diffusers gets `blend_v`, `blend_h` and `blend_t` as self-contained methods of `AutoencoderMixin` in
`models/autoencoders/vae.py` (a `self` parameter added, everything else as written in `tileblend.blend`). Every
autoencoder that keeps its own blend methods copies them under a "Copied from" comment, so editing `tileblend/blend.py`
and rerunning `tileblend rewrite` is how the upstream code is kept in sync.
"""

import ast
import inspect
from dataclasses import dataclass

from .. import blend
from ..blend import BLEND_AXES


SOURCE_MODULE = "diffusers.models.autoencoders.vae"
SOURCE_CLASS = "AutoencoderMixin"
METHOD_INDENT = " " * 4


@dataclass(frozen=True)
class UpstreamCode:
    """`methods`: name -> method text indented for a class body, in the order blend_v, blend_h, blend_t. Every text
    ends with a newline."""

    methods: dict[str, str]

    def copied_from(self, name: str) -> str:
        """The "Copied from" target of method `name`, as written after `# Copied from `."""
        return f"{SOURCE_MODULE}.{SOURCE_CLASS}.{name}"


def _definition_lines(lines: list[str], node: ast.FunctionDef) -> list[str]:
    first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
    return lines[first - 1 : node.end_lineno]


def _as_method(lines: list[str], node: ast.FunctionDef) -> str:
    """The function's lines with `self` as first parameter, indented one level."""
    text = _definition_lines(lines, node)
    first_argument = node.args.args[0]
    row = first_argument.lineno - node.lineno
    line = text[row].encode()  # ast offsets count UTF-8 bytes
    text[row] = (line[: first_argument.col_offset] + b"self, " + line[first_argument.col_offset :]).decode()
    return "".join(METHOD_INDENT + line if line.strip() else line for line in text)


def upstream_code(source: str | None = None) -> UpstreamCode:
    """Build the upstream text from `source` (default: the source of `tileblend.blend`)."""
    if source is None:
        source = inspect.getsource(blend)
    lines = source.splitlines(keepends=True)
    functions = {node.name: node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}
    return UpstreamCode(methods={name: _as_method(lines, functions[name]) for name in BLEND_AXES})
