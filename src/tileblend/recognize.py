"""Recognise diffusers' row-loop blend methods from their source.

A method is a loop blend when its body is, statement for statement, the loop below for some loop variable `V`, some
tensor rank and some position of `V` in the index, once parameters are named `self, a, b, blend_extent`:

    blend_extent = min(a.shape[K], b.shape[K], blend_extent)
    for V in range(blend_extent):
        b[:, ..., V, ...] = a[:, ..., -blend_extent + V, ...] * (1 - V / blend_extent) + b[:, ..., V, ...] * (V / blend_extent)
    return b

`K` is the position of `V` counted from the start or from the end, and the method's name must match the axis it
blends for that rank (`blend_v`: -2, `blend_h`: -1, `blend_t`: -3). The match is structural (ast), so line wrapping,
parentheses and annotations do not matter, while any other arithmetic, statement or name does. The runtime patch
(`tileblend.patch`) and the upstream rewriter (`tileblend.upstream.rewrite`) share this one recogniser.
"""

import ast
from dataclasses import dataclass

from .blend import BLEND_AXES


LOOP_TEMPLATE = """\
blend_extent = min(a.shape[{k}], b.shape[{k}], blend_extent)
for {v} in range(blend_extent):
    b[{b_index}] = a[{a_index}] * (1 - {v} / blend_extent) + b[{b_index}] * ({v} / blend_extent)
return b
"""


@dataclass(frozen=True)
class LoopBlend:
    """A recognised loop: the method name, the axis it blends (negative) and the tensor rank its indexing assumes."""

    name: str
    axis: int
    rank: int


def _index(rank: int, position: int, expression: str) -> str:
    return ", ".join(expression if i == position else ":" for i in range(rank))


def _shape_of_loop(function: ast.FunctionDef):
    """Read (loop variable, rank, position, shape index) off a function shaped like a loop blend, or None."""
    if len(function.body) != 3:
        return None
    clamp, loop, _ = function.body
    if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name) and len(loop.body) == 1):
        return None
    assign = loop.body[0]
    if not (
        isinstance(assign, ast.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Subscript)
    ):
        return None
    index = assign.targets[0].slice
    elements = index.elts if isinstance(index, ast.Tuple) else [index]
    positions = [i for i, element in enumerate(elements) if not isinstance(element, ast.Slice)]
    if len(positions) != 1:
        return None
    try:
        shape_index = ast.literal_eval(clamp.value.args[0].slice)
    except (AttributeError, IndexError, ValueError, TypeError, SyntaxError):
        return None
    if not isinstance(shape_index, int):
        return None
    return loop.target.id, len(elements), positions[0], shape_index


def recognize(function: ast.FunctionDef) -> LoopBlend | None:
    """Return the `LoopBlend` that `function` implements, or None when it is anything else."""
    if function.name not in BLEND_AXES or function.decorator_list:
        return None
    arguments = function.args
    if (
        [argument.arg for argument in arguments.args] != ["self", "a", "b", "blend_extent"]
        or arguments.posonlyargs
        or arguments.kwonlyargs
        or arguments.vararg
        or arguments.kwarg
        or arguments.defaults
    ):
        return None
    shape = _shape_of_loop(function)
    if shape is None:
        return None
    variable, rank, position, shape_index = shape
    axis = position - rank
    if variable in ("self", "a", "b", "blend_extent") or shape_index not in (position, axis):
        return None
    if BLEND_AXES[function.name] != axis:
        return None
    expected = LOOP_TEMPLATE.format(
        k=shape_index,
        v=variable,
        b_index=_index(rank, position, variable),
        a_index=_index(rank, position, f"-blend_extent + {variable}"),
    )
    if [ast.dump(statement) for statement in function.body] != [ast.dump(s) for s in ast.parse(expected).body]:
        return None
    return LoopBlend(name=function.name, axis=axis, rank=rank)


def blend_candidates(tree: ast.AST):
    """Yield (class node, method node) for every method named like a blend (`blend_v`, `blend_h`, `blend_t`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                if isinstance(statement, ast.FunctionDef) and statement.name in BLEND_AXES:
                    yield node, statement
