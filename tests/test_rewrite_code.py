"""The upstream text generated from `tileblend.blend`, and the rewrite of a small hand-written diffusers-like tree."""

import inspect

import torch

from tileblend import blend
from tileblend.cli import main as tileblend
from tileblend.compare import bitwise_equal
from tileblend.reference import REFERENCE_FUNCTIONS
from tileblend.upstream.blend_methods import upstream_code
from tileblend.upstream.model_files import MethodId
from tileblend.upstream.rewrite import plan_rewrite


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


class Standalone:
    def encode(self, x):
        return x

"""
    + LOOP.format(name="blend_v", k=2, v="y", index=":, :, y, :", a_index=":, :, -blend_extent + y, :")
)

TINY_METHODS = [MethodId("TinyVAE", "blend_v"), MethodId("TinyVAE", "blend_h"), MethodId("Standalone", "blend_v")]


def make_tree(root):
    package = root / "src" / "diffusers"
    (package / "models" / "autoencoders").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "models" / "autoencoders" / "vae.py").write_text(VAE)
    (package / "models" / "autoencoders" / "tiny.py").write_text(MODEL)
    return package / "models" / "autoencoders"


def test_generated_code_is_blend_py_and_blends_like_the_loop():
    code = upstream_code()
    namespace = {"torch": torch}
    exec("class Mixin:\n" + "\n".join(code.methods.values()), namespace)
    mixin = namespace["Mixin"]()
    for name, method in code.methods.items():
        assert method.startswith(f"    def {name}(self, a: torch.Tensor, b: torch.Tensor, blend_extent: int)")
        # The method is blend.py's function, indented, with `self` added: nothing else.
        function = inspect.getsource(getattr(blend, name))
        assert method.replace("(self, a:", "(a:").replace("\n    ", "\n").removeprefix("    ") == function
        for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            a, b = torch.randn(2, 3, 9, 10, 11).to(dtype), torch.randn(2, 3, 9, 10, 11).to(dtype)
            expected = REFERENCE_FUNCTIONS[name](a.clone(), b.clone(), 7)
            assert getattr(mixin, name)(a, b, 7) is b
            assert bitwise_equal(b, expected)


def test_rewrite_of_a_small_tree_follows_blend_py(tmp_path, capsys):
    autoencoders = make_tree(tmp_path)
    assert tileblend(["rewrite", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "models/autoencoders/tiny.py: rewritten: TinyVAE.blend_v, TinyVAE.blend_h, Standalone.blend_v" in out
    assert "models/autoencoders/tiny.py: skipped (named like a blend, not the loop): TinyVAE.blend_t" in out
    tiny = (autoencoders / "tiny.py").read_text()
    assert "from .vae import AutoencoderMixin, DecoderOutput\n" in tiny  # self-contained copies: no new imports
    assert "Copied from diffusers.models.autoencoders.other" not in tiny
    assert tiny.count("    # Copied from diffusers.models.autoencoders.vae.AutoencoderMixin.blend_") == 3
    assert "        return b  # named like a blend, not the loop\n" in tiny
    vae = (autoencoders / "vae.py").read_text()
    assert vae.index("class AutoencoderMixin:") < vae.index("    def blend_v(self") < vae.index("    def blend_t(self")
    assert vae.endswith(upstream_code().methods["blend_t"])

    # A change of blend.py reaches every copy on the next run, and only then.
    source = inspect.getsource(blend).replace(
        "    if blend_extent <= 0:", "    # tuned upstream\n    if blend_extent <= 0:"
    )
    tuned = upstream_code(source)
    plans = {plan.path.name: plan for plan in plan_rewrite(tmp_path, tuned).files}
    assert plans["tiny.py"].rewritten == TINY_METHODS
    assert plans["tiny.py"].new.count("        # tuned upstream\n") == 3
    assert plans["vae.py"].new.count("        # tuned upstream\n") == 3
    for plan in plans.values():
        plan.path.write_text(plan.new)
    plans = plan_rewrite(tmp_path, tuned).files
    assert not any(plan.changed for plan in plans)
    assert [plan.up_to_date for plan in plans if plan.path.name == "tiny.py"] == [TINY_METHODS]


def test_inherit_deletes_the_loops_of_mixin_classes_and_copies_the_others(tmp_path, capsys):
    autoencoders = make_tree(tmp_path)
    assert tileblend(["rewrite", str(tmp_path), "--inherit"]) == 0
    out = capsys.readouterr().out
    assert "models/autoencoders/tiny.py: rewritten: Standalone.blend_v" in out
    assert "models/autoencoders/tiny.py: deleted (inherited): TinyVAE.blend_v, TinyVAE.blend_h" in out
    tiny = (autoencoders / "tiny.py").read_text()
    # TinyVAE keeps its other methods, one blank line apart; Standalone, which lacks the mixin, gets the copy.
    assert "    def decode(self, z):\n        return z\n\n    def blend_t(self, a, b, blend_extent):\n" in tiny
    assert "Copied from diffusers.models.autoencoders.other" not in tiny
    assert tiny.count("    # Copied from diffusers.models.autoencoders.vae.AutoencoderMixin.blend_v\n") == 1
    assert tiny.endswith(upstream_code().methods["blend_v"])
    assert "\n\n\n\n" not in tiny

    # Idempotent, and it also turns an earlier run's copies into inherited methods.
    assert not any(plan.changed for plan in plan_rewrite(tmp_path, inherit=True).files)
    make_tree(tmp_path / "again")
    assert tileblend(["rewrite", str(tmp_path / "again")]) == 0
    assert tileblend(["rewrite", str(tmp_path / "again"), "--inherit"]) == 0
    assert (tmp_path / "again" / autoencoders.relative_to(tmp_path) / "tiny.py").read_text() == tiny


def test_a_tree_without_blends_is_an_error(tmp_path, capsys):
    autoencoders = make_tree(tmp_path)
    (autoencoders / "tiny.py").write_text("import torch\n")
    assert tileblend(["rewrite", str(tmp_path)]) == 2
    assert "no loop blend methods found" in capsys.readouterr().err
    assert (autoencoders / "vae.py").read_text() == VAE
