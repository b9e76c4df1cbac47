"""The upstream text generated from `tileblend.blend`, and the rewrite of a small hand-written diffusers-like tree."""

import inspect

import pytest
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


def files_of(root) -> dict[str, str]:
    return {str(path.relative_to(root)): path.read_text() for path in sorted(root.rglob("*.py"))}


COPY_COMMENT = "    # Copied from diffusers.models.autoencoders.vae.AutoencoderMixin.blend_v\n"


@pytest.mark.parametrize(
    "edit",
    [
        ("blend_v(self, a: torch.Tensor, b:", "blend_v(self, a: torch.Tensor, scale: float, b:"),  # a parameter
        ("        if blend_extent <= 0:\n", "        print('mine')\n        if blend_extent <= 0:\n"),  # own code
        (COPY_COMMENT, COPY_COMMENT + "    @torch.no_grad()\n"),  # a decorator below the comment
    ],
    ids=["parameter", "own-code", "decorator"],
)
@pytest.mark.parametrize("inherit", [False, True], ids=["copies", "inherit"])
def test_an_edited_copy_is_left_alone_and_reported(tmp_path, capsys, edit, inherit):
    """A method under tileblend's own "Copied from" comment that was edited since is neither refreshed nor deleted."""
    autoencoders = make_tree(tmp_path)
    assert tileblend(["rewrite", str(tmp_path)]) == 0
    tiny = autoencoders / "tiny.py"
    first = tiny.read_text().index(COPY_COMMENT)
    text = tiny.read_text()
    edited = text[:first] + text[first:].replace(*edit, 1)
    assert edited != text
    tiny.write_text(edited)
    capsys.readouterr()
    assert tileblend(["rewrite", str(tmp_path), *(["--inherit"] if inherit else [])]) == 0
    out = capsys.readouterr().out
    assert (
        "tiny.py: skipped (under tileblend's Copied from comment, edited since it was written): TinyVAE.blend_v" in out
    )
    assert edited[first : edited.index("\n\n", first)] in tiny.read_text()


def test_a_mixin_method_of_its_own_is_refused(tmp_path, capsys):
    autoencoders = make_tree(tmp_path)
    own = "    @torch.no_grad()\n    def blend_v(self, a, b, blend_extent):\n        return b\n"
    (autoencoders / "vae.py").write_text(VAE + "\n" + own)
    before = files_of(tmp_path)
    assert tileblend(["rewrite", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "vae.py: line 12: AutoencoderMixin.blend_v is neither the row loop nor a text tileblend wrote" in err
    assert err.count("\n") == 1 and files_of(tmp_path) == before


@pytest.mark.parametrize("name", ["blend_row_loop", "TestTinyVAETilingBlend"])
def test_a_test_definition_of_its_own_is_refused(tmp_path, capsys, monkeypatch, name):
    """A user's class or function named like one the rewrite adds to upstream's tests is never replaced."""
    from tileblend.upstream import test_files
    from tileblend.upstream.test_cases import CASES

    make_tree(tmp_path)
    monkeypatch.setitem(CASES, "TinyVAE", CASES["AutoencoderKL"])
    tests = tmp_path / "tests" / "models" / "autoencoders"
    tests.mkdir(parents=True)
    (tests / "testing_utils.py").write_text(
        "from ...testing_utils import torch_device\n\n\nclass AutoencoderTesterMixin:\n    pass\n"
        + ("\n\ndef blend_row_loop(a, b):\n    return b\n" if name == "blend_row_loop" else "")
    )
    (tests / "test_models_tiny.py").write_text(
        "from .testing_utils import AutoencoderTesterMixin\n\n\nclass TinyVAETesterConfig:\n"
        "    @property\n    def model_class(self):\n        return TinyVAE\n"
        + ("\n\nclass TestTinyVAETilingBlend:\n    pass\n" if name.startswith("Test") else "")
    )
    assert test_files.TESTING_UTILS.name == "testing_utils.py"
    before = files_of(tmp_path)
    assert tileblend(["rewrite", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f": {name} is not the text tileblend writes (edited, or someone else's)" in err
    assert err.count("\n") == 1 and files_of(tmp_path) == before


def test_a_switch_back_from_the_inherit_layout_is_refused(tmp_path, capsys):
    """copies -> --inherit converts the whole tree; --inherit -> copies cannot (nothing says which classes had a
    loop), so it is refused, and --check does not call the inherit layout up to date for the copies layout."""
    make_tree(tmp_path)
    assert tileblend(["rewrite", str(tmp_path)]) == 0
    assert tileblend(["rewrite", str(tmp_path), "--inherit"]) == 0
    assert "deleted (inherited): TinyVAE.blend_v, TinyVAE.blend_h" in capsys.readouterr().out
    inherited = files_of(tmp_path)
    for mode in ([], ["--check"], ["--diff"]):
        assert tileblend(["rewrite", str(tmp_path), *mode]) == 2
        err = capsys.readouterr().err
        assert "is rewritten in the --inherit layout" in err and err.count("\n") == 1
    assert tileblend(["rewrite", str(tmp_path), "--inherit", "--check"]) == 0
    assert files_of(tmp_path) == inherited


def test_a_standalone_test_module_of_its_own_is_refused(tmp_path, capsys):
    from tileblend.upstream.standalone_test import TEST_MODULE_PATH

    make_tree(tmp_path)
    module = tmp_path / TEST_MODULE_PATH
    module.parent.mkdir(parents=True)
    module.write_text("# someone's own tests\n")
    before = files_of(tmp_path)
    assert tileblend(["rewrite", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "it is not the module tileblend writes (edited, or someone else's)" in err and err.count("\n") == 1
    assert files_of(tmp_path) == before
    module.unlink()
    assert tileblend(["rewrite", str(tmp_path)]) == 0
    assert tileblend(["rewrite", str(tmp_path)]) == 0 and "0 files changed" in capsys.readouterr().out
