"""`tileblend.recognize` accepts diffusers' row-loop blends in every textual form, and nothing else."""

import ast
import functools
import pathlib
import textwrap

import diffusers
import pytest

from tileblend.blend import BLEND_AXES
from tileblend.recognize import LoopBlend, blend_candidates, recognize


AUTOENCODERS = pathlib.Path(diffusers.__file__).parent / "models" / "autoencoders"


@functools.cache
def installed_blend_methods():
    """(file name, class name, method source) of every blend-named method in the installed diffusers."""
    methods = []
    for path in sorted(AUTOENCODERS.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        for cls, function in blend_candidates(ast.parse(source)):
            methods.append(
                (path.name, cls.name, textwrap.dedent(ast.get_source_segment(source, function, padded=True)))
            )
    return methods


def parse_function(source: str) -> ast.FunctionDef:
    return ast.parse(textwrap.dedent(source)).body[0]


def test_every_installed_variant_is_recognised():
    """diffusers 0.42.1 writes its 44 loops in 9 texts (loop variable, shape index sign, rank, line wrapping)."""
    methods = installed_blend_methods()
    variants = {}
    for file_name, class_name, source in methods:
        body = source.split("\n", 1)[1]  # the text after the def line
        variants.setdefault(body, []).append(f"{file_name}:{class_name}")
        loop = recognize(parse_function(source))
        assert loop is not None, f"{file_name}:{class_name}\n{source}"
        # Written out, not read from BLEND_AXES: the recogniser checks its axis against that table.
        assert loop.axis == {"blend_v": -2, "blend_h": -1, "blend_t": -3}[parse_function(source).name]
        assert loop.rank in (4, 5)
    if diffusers.__version__ == "0.42.1":
        assert len(methods) == 44
        assert len(variants) == 9


def test_installed_ranks_follow_the_indexing():
    ranks = {}
    for file_name, _, source in installed_blend_methods():
        ranks.setdefault(file_name, set()).add(recognize(parse_function(source)).rank)
    assert ranks["autoencoder_kl.py"] == {4}
    assert ranks["autoencoder_kl_hunyuan_video.py"] == {5}


def loop_source(
    name="blend_v",
    variable="y",
    rank=4,
    shape_index=2,
    position=None,
    clamp="blend_extent = min(a.shape[{k}], b.shape[{k}], blend_extent)",
    rows="b[{b}] = a[{a}] * (1 - {v} / blend_extent) + b[{b}] * ({v} / blend_extent)",
    signature="self, a, b, blend_extent",
    extra="",
    decorator="",
):
    """A hand-written blend method, by default the 4D blend_v loop, with any piece replaced."""
    position = rank - 2 if position is None else position

    def index(expression):
        return ", ".join(expression if i == position else ":" for i in range(rank))

    return (
        f"{decorator}def {name}({signature}):\n"
        f"    {clamp.format(k=shape_index)}\n"
        f"    for {variable} in range(blend_extent):\n"
        f"        {rows.format(a=index(f'-blend_extent + {variable}'), b=index(variable), v=variable)}\n"
        f"{extra}"
        f"    return b\n"
    )


@pytest.mark.parametrize(
    "source, expected",
    [
        (loop_source(), LoopBlend("blend_v", -2, 4)),
        (loop_source(variable="x"), LoopBlend("blend_v", -2, 4)),
        (loop_source(variable="row"), LoopBlend("blend_v", -2, 4)),
        (loop_source(shape_index=-2), LoopBlend("blend_v", -2, 4)),
        (loop_source(rank=5, shape_index=3), LoopBlend("blend_v", -2, 5)),
        (loop_source(rank=5, shape_index=-2), LoopBlend("blend_v", -2, 5)),
        (loop_source(rank=3, shape_index=1), LoopBlend("blend_v", -2, 3)),
        (loop_source(name="blend_h", variable="x", rank=4, position=3, shape_index=3), LoopBlend("blend_h", -1, 4)),
        (loop_source(name="blend_h", variable="x", rank=5, position=4, shape_index=-1), LoopBlend("blend_h", -1, 5)),
        (loop_source(name="blend_t", variable="x", rank=5, position=2, shape_index=-3), LoopBlend("blend_t", -3, 5)),
        (loop_source(name="blend_t", variable="x", rank=5, position=2, shape_index=2), LoopBlend("blend_t", -3, 5)),
        (loop_source(name="blend_t", variable="t", rank=6, position=3, shape_index=-3), LoopBlend("blend_t", -3, 6)),
        # Annotations, line wrapping and redundant parentheses are not structure.
        (
            loop_source(signature="self, a: torch.Tensor, b: torch.Tensor, blend_extent: int) -> (torch.Tensor"),
            LoopBlend("blend_v", -2, 4),
        ),
        (
            loop_source(
                rows="b[{b}] = (\n            a[{a}] * (1 - {v} / blend_extent)\n            + b[{b}] * (\n"
                "                {v} / blend_extent\n            )\n        )"
            ),
            LoopBlend("blend_v", -2, 4),
        ),
        (
            loop_source(
                clamp="blend_extent = min(\n        a.shape[{k}],\n        b.shape[{k}],\n        blend_extent,\n    )"
            ),
            LoopBlend("blend_v", -2, 4),
        ),
    ],
)
def test_hand_written_variants_are_recognised(source, expected):
    assert recognize(parse_function(source)) == expected


@pytest.mark.parametrize(
    "source",
    [
        # Different arithmetic.
        loop_source(rows="b[{b}] = a[{a}] * ({v} / blend_extent) + b[{b}] * (1 - {v} / blend_extent)"),
        loop_source(rows="b[{b}] = b[{b}] * ({v} / blend_extent) + a[{a}] * (1 - {v} / blend_extent)"),
        loop_source(rows="b[{b}] = a[{a}] * (1 - {v} / blend_extent) - b[{b}] * ({v} / blend_extent)"),
        loop_source(rows="b[{b}] = a[{a}] * (1 - {v} / blend_extent) + b[{b}] * ({v} // blend_extent)"),
        loop_source(rows="b[{b}] = a[{a}] * (1 - {v} / blend_extent) + b[{b}] * ((1 + {v}) / blend_extent)"),
        loop_source(rows="b[{b}] += a[{a}] * (1 - {v} / blend_extent) + b[{b}] * ({v} / blend_extent)"),
        loop_source(rows="b[{b}] = torch.lerp(a[{a}], b[{b}], {v} / blend_extent)"),
        # `1.0 - y / n` computes the same doubles as `1 - y / n`, but the match is literal: diffusers never writes it,
        # and a method the recogniser does not know stays untouched, which is always safe.
        loop_source(rows="b[{b}] = a[{a}] * (1.0 - {v} / blend_extent) + b[{b}] * ({v} / blend_extent)"),
        loop_source(clamp="blend_extent = min(a.shape[{k}], b.shape[{k}], blend_extent + 1)"),
        loop_source(clamp="blend_extent = max(a.shape[{k}], b.shape[{k}], blend_extent)"),
        loop_source(clamp="blend_extent = min(a.shape[{k}], b.shape[3], blend_extent)"),
        loop_source(clamp="blend_extent = min(a.shape[{k}], blend_extent)"),
        # Extra statements, a docstring, other names, decorators, defaults.
        loop_source(extra="    b = b.clone()\n"),
        loop_source(extra="    print(blend_extent)\n"),
        loop_source(signature="self, x, y, blend_extent"),
        loop_source(signature="self, a, b, extent"),
        loop_source(signature="self, a, b, blend_extent=0"),
        loop_source(signature="self, a, b, blend_extent, *, dim=-2"),
        loop_source(signature="a, b, blend_extent"),
        loop_source(variable="b"),
        loop_source(variable="blend_extent"),
        loop_source(decorator="@staticmethod\n"),
        loop_source(decorator="@torch.no_grad()\n"),
        # Name and axis disagree, or the shape index is not the indexed axis.
        loop_source(name="blend_h"),
        loop_source(name="blend_t", rank=5, position=3, shape_index=3),
        loop_source(name="blend_v", rank=5, position=2, shape_index=2),
        loop_source(shape_index=3),
        loop_source(shape_index=-1),
        loop_source(rank=5, shape_index=2),
        loop_source(name="blend_x"),
    ],
)
def test_anything_else_is_rejected(source):
    assert recognize(parse_function(source)) is None


def test_docstring_variant_is_rejected():
    source = loop_source().replace("):\n", '):\n    """Blend a into b."""\n', 1)
    assert '"""' in source
    assert recognize(parse_function(source)) is None


def test_minimax_blend_is_rejected():
    """MiniMax's vectorized `_blend` has other semantics; even under a blend name it is not the loop."""
    module = AUTOENCODERS / "autoencoder_kl_minimax_h3.py"
    if not module.exists():
        pytest.skip(f"diffusers {diffusers.__version__} has no MiniMax autoencoder (added in a later release)")
    source = module.read_text(encoding="utf-8")
    blends = [
        node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef) and node.name == "_blend"
    ]
    assert blends
    for function in blends:
        assert recognize(function) is None
        for name in BLEND_AXES:
            function.name = name
            assert recognize(function) is None


def test_candidates_are_the_blend_named_methods():
    tree = ast.parse(
        "class A:\n"
        "    def blend_v(self, a, b, blend_extent):\n        return b\n"
        "    def blend(self, a, b, blend_extent):\n        return b\n"
        "    def _blend(self, a, b, blend_extent):\n        return b\n"
        "def blend_h(a, b, blend_extent):\n    return b\n"
        "class B:\n"
        "    def blend_t(self, a, b, blend_extent):\n        return b\n"
    )
    assert [(cls.name, function.name) for cls, function in blend_candidates(tree)] == [
        ("A", "blend_v"),
        ("B", "blend_t"),
    ]
