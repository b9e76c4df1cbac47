"""The upstream text generated from `tileblend.blend`, and the rewrite of a small hand-written diffusers-like tree."""

import inspect

import pytest
import torch

from tileblend import blend
from tileblend.cli import main as tileblend
from tileblend.compare import bitwise_equal
from tileblend.reference import REFERENCE_FUNCTIONS
from tileblend.rewrite import plan_rewrite
from tileblend.rewrite_plan import _import_lines
from tileblend.upstream_code import upstream_code


LOOP = """\
    def {name}(self, a: torch.Tensor, b: torch.Tensor, blend_extent: int) -> torch.Tensor:
        blend_extent = min(a.shape[{k}], b.shape[{k}], blend_extent)
        for {v} in range(blend_extent):
            b[{index}] = a[{a_index}] * (1 - {v} / blend_extent) + b[{index}] * ({v} / blend_extent)
        return b
"""
VAE = """\
import torch


class DecoderOutput:
    pass


class AutoencoderMixin:
    def enable_tiling(self):
        self.use_tiling = True
"""
MODEL = (
    """\
import torch

from .vae import AutoencoderMixin, DecoderOutput


class TinyVAE(AutoencoderMixin):
    def decode(self, z):
        return z

    # Copied from diffusers.models.autoencoders.other.Other.blend_v
"""
    + LOOP.format(name="blend_v", k=2, v="y", index=":, :, y, :", a_index=":, :, -blend_extent + y, :")
    + "\n"
    + LOOP.format(name="blend_h", k=-1, v="x", index=":, :, :, x", a_index=":, :, :, -blend_extent + x")
    + """
    def blend_t(self, a, b, blend_extent):
        return b  # named like a blend, not the loop
"""
)


def make_tree(root):
    package = root / "src" / "diffusers"
    (package / "models" / "autoencoders").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "models" / "autoencoders" / "vae.py").write_text(VAE)
    (package / "models" / "autoencoders" / "tiny.py").write_text(MODEL)
    return package / "models" / "autoencoders"


def test_generated_code_is_blend_py_and_blends_like_the_loop():
    code = upstream_code()
    assert code.function in inspect.getsource(blend)
    assert code.function.startswith("def blend_tiles(a: torch.Tensor, b: torch.Tensor, blend_extent: int, dim: int)")
    namespace = {"torch": torch}
    exec(code.function, namespace)
    exec("class Mixin:\n" + "\n".join(code.methods.values()), namespace)
    mixin = namespace["Mixin"]()
    for name, method in code.methods.items():
        assert method.startswith(f"    def {name}(self, a: torch.Tensor, b: torch.Tensor, blend_extent: int)")
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            a, b = torch.randn(2, 3, 9, 10, 11).to(dtype), torch.randn(2, 3, 9, 10, 11).to(dtype)
            expected = REFERENCE_FUNCTIONS[name](a.clone(), b.clone(), 7)
            assert getattr(mixin, name)(a, b, 7) is b
            assert bitwise_equal(b, expected)


def test_rewrite_of_a_small_tree_follows_blend_py(tmp_path, capsys):
    autoencoders = make_tree(tmp_path)
    assert tileblend(["rewrite", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "models/autoencoders/tiny.py: rewritten: TinyVAE.blend_v, TinyVAE.blend_h" in out
    assert "models/autoencoders/tiny.py: skipped (named like a blend, not the loop): TinyVAE.blend_t" in out
    tiny = (autoencoders / "tiny.py").read_text()
    assert "from .vae import AutoencoderMixin, DecoderOutput, blend_tiles\n" in tiny
    assert "Copied from diffusers.models.autoencoders.other" not in tiny
    assert tiny.count("    # Copied from diffusers.models.autoencoders.vae.AutoencoderMixin.blend_") == 2
    assert "        return b  # named like a blend, not the loop\n" in tiny
    vae = (autoencoders / "vae.py").read_text()
    assert vae.index("def blend_tiles(") < vae.index("class AutoencoderMixin:") < vae.index("def blend_t(self")

    # A change of blend.py reaches every copy on the next run, and only then.
    source = inspect.getsource(blend).replace("    n = min(", "    # tuned upstream\n    n = min(", 1)
    source = source.replace("See `blend_tiles`.", "See `blend_tiles` (v2).")
    tuned = upstream_code(source)
    plans = {plan.path.name: plan for plan in plan_rewrite(tmp_path, tuned).files}
    assert plans["tiny.py"].rewritten == ["TinyVAE.blend_v", "TinyVAE.blend_h"]
    assert "See `blend_tiles` (v2)." in plans["tiny.py"].new
    assert "    # tuned upstream\n    n = min(" in plans["vae.py"].new
    for plan in plans.values():
        plan.path.write_text(plan.new)
    plans = plan_rewrite(tmp_path, tuned).files
    assert not any(plan.changed for plan in plans)
    assert [plan.up_to_date for plan in plans if plan.path.name == "tiny.py"] == [
        ["TinyVAE.blend_v", "TinyVAE.blend_h"]
    ]


def test_a_tree_without_blends_is_an_error(tmp_path, capsys):
    autoencoders = make_tree(tmp_path)
    (autoencoders / "tiny.py").write_text("import torch\n")
    assert tileblend(["rewrite", str(tmp_path)]) == 2
    assert "no loop blend methods found" in capsys.readouterr().err
    assert (autoencoders / "vae.py").read_text() == VAE


@pytest.mark.parametrize(
    "names, expected",
    [
        (
            ["Encoder", "blend_tiles", "AutoencoderMixin"],
            ["from .vae import AutoencoderMixin, Encoder, blend_tiles\n"],
        ),
        (["blend_tiles", "CONSTANT", "Decoder"], ["from .vae import CONSTANT, Decoder, blend_tiles\n"]),
        (
            ["DiagonalGaussianDistribution", "MaskConditionDecoder", "AutoencoderMixin", "DecoderOutput", "Encoder"]
            + ["blend_tiles"],
            ["from .vae import (\n"]
            + [f"    {name},\n" for name in ("AutoencoderMixin", "DecoderOutput", "DiagonalGaussianDistribution")]
            + [f"    {name},\n" for name in ("Encoder", "MaskConditionDecoder", "blend_tiles")]
            + [")\n"],
        ),
    ],
)
def test_import_is_sorted_and_wrapped_like_ruff(names, expected):
    assert _import_lines(names) == expected


def test_wrapped_import_stays_wrapped():
    assert _import_lines(["Encoder", "blend_tiles"], wrapped=True) == [
        "from .vae import (\n",
        "    Encoder,\n",
        "    blend_tiles,\n",
        ")\n",
    ]
