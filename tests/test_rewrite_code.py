"""The upstream text generated from `tileblend.blend`, and the rewrite of a small hand-written diffusers-like tree."""

import inspect
import subprocess
from pathlib import Path

import pytest
import torch

from tileblend import blend
from tileblend.cli import main as tileblend
from tileblend.compare import bitwise_equal
from tileblend.reference import REFERENCE_FUNCTIONS
from tileblend.upstream.blend_methods import upstream_code
from tileblend.upstream.model_files import MethodId
from tileblend.upstream.rewrite import plan_rewrite


REPO = Path(__file__).resolve().parents[1]


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


def edited_method(text: str) -> str:
    """A method text with its body changed: a line added before its last one (the docstring kept)."""
    last = text.splitlines(keepends=True)[-1]
    return text.removesuffix(last) + "        b.clamp_(-1, 1)\n" + last


def line_of(text: str, part: str) -> int:
    return text[: text.index(part)].count("\n") + 1


@pytest.mark.parametrize("synced", [False, True], ids=["source-only", "after-fix-copies"])
def test_an_edited_mixin_method_stops_the_rewrite(tmp_path, capsys, synced):
    """A mixin method whose body was edited under tileblend's docstring (as a contributor edits the source, before
    `make fix-copies` makes every copy the same) is not a text tileblend wrote: the rewrite stops, naming the file,
    the line and the method, and writes nothing."""
    autoencoders = make_tree(tmp_path)
    assert tileblend(["rewrite", str(tmp_path)]) == 0
    written = upstream_code().methods["blend_v"]
    for path in [autoencoders / "vae.py", *([autoencoders / "tiny.py"] if synced else [])]:
        assert written in path.read_text()
        path.write_text(path.read_text().replace(written, edited_method(written)))
    line = line_of((autoencoders / "vae.py").read_text(), edited_method(written))
    before = files_of(tmp_path)
    capsys.readouterr()
    assert tileblend(["rewrite", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"vae.py: line {line}: AutoencoderMixin.blend_v is neither the row loop nor a text tileblend wrote" in err
    assert err.count("\n") == 1 and files_of(tmp_path) == before


def test_an_earlier_text_tileblend_wrote_is_refreshed(tmp_path, capsys, monkeypatch):
    """A tree rewritten from an earlier `tileblend.blend`: its mixin methods (and their copies) are refreshed when
    that text is listed among the ones tileblend wrote, and stop the rewrite when it is not."""
    from tileblend.upstream import written_methods

    autoencoders = make_tree(tmp_path)
    source = inspect.getsource(blend).replace("    if blend_extent <= 0:", "    # earlier\n    if blend_extent <= 0:")
    earlier = upstream_code(source)
    for plan in plan_rewrite(tmp_path, earlier).files:
        plan.path.write_text(plan.new)
    before = files_of(tmp_path)
    assert tileblend(["rewrite", str(tmp_path)]) == 2
    assert "AutoencoderMixin.blend_v is neither the row loop nor a text tileblend wrote" in capsys.readouterr().err
    assert files_of(tmp_path) == before
    listed = {written_methods.digest(text) for text in earlier.methods.values()}
    monkeypatch.setattr(written_methods, "EARLIER", written_methods.EARLIER | listed)
    assert tileblend(["rewrite", str(tmp_path)]) == 0
    assert "tiny.py: rewritten: TinyVAE.blend_v, TinyVAE.blend_h, Standalone.blend_v" in capsys.readouterr().out
    vae = (autoencoders / "vae.py").read_text()
    assert all(text in vae for text in upstream_code().methods.values()) and "# earlier" not in vae


def test_every_committed_text_of_the_mixin_methods_is_listed():
    """Every form of the mixin methods generated from a committed `tileblend/blend.py` (since the methods were
    self-contained) is the current one or listed in `written_methods.EARLIER`, so that a rewrite refreshes a tree
    rewritten by any of them. Skipped outside a git checkout with its history."""
    from tileblend.upstream import written_methods

    log = subprocess.run(
        ["git", "log", "--format=%H", f"{written_methods.FIRST_COMMIT}^..HEAD", "--", "src/tileblend/blend.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if log.returncode != 0 or not log.stdout:
        pytest.skip("no git history of src/tileblend/blend.py here (not a checkout, or a shallow clone)")
    current = {written_methods.digest(text) for text in upstream_code().methods.values()}
    for commit in log.stdout.split():
        shown = subprocess.run(
            ["git", "show", f"{commit}:src/tileblend/blend.py"], cwd=REPO, capture_output=True, text=True, check=True
        )
        for name, text in upstream_code(shown.stdout).methods.items():
            digest = written_methods.digest(text)
            assert digest in written_methods.EARLIER | current, f"{name} of blend.py at {commit}: add {digest!r}"


def layout_with_tests(tmp_path, monkeypatch, utils: str = "", module: str = "") -> Path:
    """A tiny tree in upstream's tester-mixin layout: testing_utils.py and one test module configuring TinyVAE (with
    `utils` and `module` appended); returns the tests folder."""
    from tileblend.upstream.test_cases import CASES

    make_tree(tmp_path)
    monkeypatch.setitem(CASES, "TinyVAE", CASES["AutoencoderKL"])
    tests = tmp_path / "tests" / "models" / "autoencoders"
    tests.mkdir(parents=True)
    (tests / "testing_utils.py").write_text(
        "from ...testing_utils import torch_device\n\n\nclass AutoencoderTesterMixin:\n    pass\n" + utils
    )
    (tests / "test_models_tiny.py").write_text(
        "from .testing_utils import AutoencoderTesterMixin\n\n\nclass TinyVAETesterConfig:\n"
        "    @property\n    def model_class(self):\n        return TinyVAE\n" + module
    )
    return tests


@pytest.mark.parametrize("name", ["blend_row_loop", "TestTinyVAETilingBlend"])
def test_a_test_definition_of_its_own_is_refused(tmp_path, capsys, monkeypatch, name):
    """A user's class or function named like one the rewrite adds to upstream's tests is never replaced."""
    from tileblend.upstream import test_files

    layout_with_tests(
        tmp_path,
        monkeypatch,
        utils="\n\ndef blend_row_loop(a, b):\n    return b\n" if name == "blend_row_loop" else "",
        module="\n\nclass TestTinyVAETilingBlend:\n    pass\n" if name.startswith("Test") else "",
    )
    assert test_files.TESTING_UTILS.name == "testing_utils.py"
    before = files_of(tmp_path)
    assert tileblend(["rewrite", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f": {name} is not the text tileblend writes (edited, or someone else's)" in err
    assert err.count("\n") == 1 and files_of(tmp_path) == before


BINDINGS = {
    "assignment": ("testing_utils.py", "blend_row_loop", "blend_row_loop = None\n"),
    "annotated": (
        "testing_utils.py",
        "AutoencoderTilingBlendTesterMixin",
        "AutoencoderTilingBlendTesterMixin: type\n",
    ),
    "import-as": ("testing_utils.py", "blend_row_loop", "from os import path as blend_row_loop\n"),
    "for-target": ("testing_utils.py", "blend_row_loop", "for blend_row_loop in ():\n    pass\n"),
    "def-under-if": ("testing_utils.py", "blend_row_loop", "if True:\n    def blend_row_loop(a, b):\n        pass\n"),
    "with-as": ("testing_utils.py", "blend_row_loop", "with open(__file__) as blend_row_loop:\n    pass\n"),
    "test-class": ("test_models_tiny.py", "TestTinyVAETilingBlend", "TestTinyVAETilingBlend = object\n"),
    "imported-mixin": (
        "test_models_tiny.py",
        "AutoencoderTilingBlendTesterMixin",
        "AutoencoderTilingBlendTesterMixin = 1\n",
    ),
}


@pytest.mark.parametrize("case", BINDINGS.values(), ids=BINDINGS.keys())
def test_a_module_level_binding_of_an_added_name_is_refused(tmp_path, capsys, monkeypatch, case):
    """Any module-level binding of a name the rewrite adds to a test file (not only a `def` or `class`) stops the
    rewrite: two bindings would shadow one another. The error names the file, the line and the name."""
    file, name, statement = case
    extra = "\n\n" + statement
    tests = layout_with_tests(
        tmp_path,
        monkeypatch,
        utils=extra if file == "testing_utils.py" else "",
        module=extra if file == "test_models_tiny.py" else "",
    )
    line = line_of((tests / file).read_text(), statement)
    line += next(index for index, text in enumerate(statement.splitlines()) if name in text)  # the binding's line
    before = files_of(tmp_path)
    assert tileblend(["rewrite", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tests / file}: line {line}: {name} is bound there by other code than tileblend's" in err
    assert err.count("\n") == 1 and files_of(tmp_path) == before


def test_a_binding_in_an_inner_scope_is_not_refused(tmp_path, capsys, monkeypatch):
    """Names bound inside a function, a class or a comprehension are not the module's: the rewrite goes on."""
    inner = (
        "\n\ndef helper():\n    blend_row_loop = 1\n    return blend_row_loop\n\n\nclass Other:\n"
        "    AutoencoderTilingBlendTesterMixin = None\n\n\nNAMES = [blend_row_loop for blend_row_loop in ()]\n"
    )
    tests = layout_with_tests(tmp_path, monkeypatch, utils=inner)
    assert tileblend(["rewrite", str(tmp_path)]) == 0
    assert "class AutoencoderTilingBlendTesterMixin" in (tests / "testing_utils.py").read_text()


def test_a_class_level_binding_of_a_mixin_method_is_refused(tmp_path, capsys):
    """`blend_v = ...` in `AutoencoderMixin` (no `def`) would be shadowed by the method the rewrite adds: refused."""
    autoencoders = make_tree(tmp_path)
    (autoencoders / "vae.py").write_text(VAE + "\n    blend_v = None\n")
    before = files_of(tmp_path)
    assert tileblend(["rewrite", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "vae.py: line 12: AutoencoderMixin.blend_v is bound there by other code than tileblend's" in err
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
