"""What `tileblend rewrite` cannot own: bindings it cannot tell apart, definitions it would shadow, files under two
names and comments it replaces. Each stops the rewrite with one line and writes nothing, or is reported."""

import os

import pytest
from test_rewrite_code import LOOP, MODEL, VAE, files_of, layout_with_tests, line_of, make_tree

from tileblend.cli import main as tileblend
from tileblend.upstream.source_files import SourceError, one_name_per_file


def refused(tmp_path, capsys, *args) -> str:
    """The one error line of a rewrite of `tmp_path` that must stop (exit 2) and write nothing."""
    before = files_of(tmp_path)
    capsys.readouterr()
    assert tileblend(["rewrite", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and files_of(tmp_path) == before
    return err


SECOND_MIXIN = {
    "class": "class AutoencoderMixin:\n    pass\n",
    "assignment": "AutoencoderMixin = DecoderOutput\n",
    "import": "from torch.nn import Module as AutoencoderMixin\n",
}


@pytest.mark.parametrize("inherit", [[], ["--inherit"]], ids=["copies", "inherit"])
@pytest.mark.parametrize("second", SECOND_MIXIN.values(), ids=SECOND_MIXIN.keys())
def test_a_mixin_bound_twice_is_refused(tmp_path, capsys, second, inherit):
    """vae.py binding `AutoencoderMixin` twice at module level: which one the models derive from depends on the
    order the module runs, so the rewrite stops, naming the second binding."""
    autoencoders = make_tree(tmp_path)
    vae = VAE + "\n\n" + second
    (autoencoders / "vae.py").write_text(vae)
    err = refused(tmp_path, capsys, *inherit)
    assert f"vae.py: line {line_of(vae, second)}: AutoencoderMixin is bound more than once at module level" in err


BASE = "class TilingBase:\n    def blend_v(self, a, b, blend_extent):\n        return b\n"


def test_a_blend_method_of_a_base_of_the_mixin_is_refused(tmp_path, capsys):
    """A blend method moved into a class `AutoencoderMixin` derives from (in vae.py, or imported from another module
    of the tree) would be shadowed by the method the rewrite adds to the mixin: refused, naming it."""
    autoencoders = make_tree(tmp_path)
    vae = VAE.replace("class AutoencoderMixin:", BASE + "\n\nclass AutoencoderMixin(TilingBase):")
    (autoencoders / "vae.py").write_text(vae)
    err = refused(tmp_path, capsys)
    assert f"vae.py: line {line_of(vae, '    def blend_v')}: TilingBase.blend_v, in a base of AutoencoderMixin" in err

    (autoencoders / "base.py").write_text(
        "class Deeper:\n    blend_h = None\n\n\nclass TilingBase(Deeper):\n    pass\n"
    )
    vae = VAE.replace("class AutoencoderMixin:", "class AutoencoderMixin(TilingBase):")
    (autoencoders / "vae.py").write_text("from .base import TilingBase\n" + vae)
    err = refused(tmp_path, capsys, "--inherit")
    assert "base.py: line 2: Deeper.blend_h, in a base of AutoencoderMixin" in err


def test_an_edited_copy_does_not_hide_the_inherit_layout(tmp_path, capsys):
    """A copy edited by its user survives `--inherit`; it is not a sign of the copies layout, so the default layout
    on that tree is still refused (it would call the tree up to date with the other copies missing)."""
    autoencoders = make_tree(tmp_path)
    assert tileblend(["rewrite", str(tmp_path)]) == 0
    tiny = autoencoders / "tiny.py"
    tiny.write_text(tiny.read_text().replace("        if blend_extent", "        print()\n        if blend_extent", 1))
    assert tileblend(["rewrite", str(tmp_path), "--inherit"]) == 0
    assert "deleted (inherited): TinyVAE.blend_h" in capsys.readouterr().out
    assert "is rewritten in the --inherit layout" in refused(tmp_path, capsys)


GLOBAL = "def setup():\n    global blend_row_loop\n    blend_row_loop = None\n"


def test_a_global_statement_of_an_added_name_is_refused(tmp_path, capsys, monkeypatch):
    """`global NAME` in a function binds the module's NAME when it runs: refused like a module-level binding."""
    tests = layout_with_tests(tmp_path, monkeypatch, utils="\n\n" + GLOBAL)
    line = line_of((tests / "testing_utils.py").read_text(), "    global")
    err = refused(tmp_path, capsys)
    assert f"testing_utils.py: line {line}: blend_row_loop is bound there by other code than tileblend's" in err


@pytest.mark.parametrize(
    ("file", "target"),
    [("vae.py", "AutoencoderMixin.blend_v"), ("tiny.py", "AutoencoderMixin.blend_t"), ("tiny.py", "TinyVAE.blend_h")],
)
def test_a_module_level_attribute_assignment_of_a_blend_is_refused(tmp_path, capsys, file, target):
    """`AutoencoderMixin.blend_v = ...` or `<Model>.blend_h = ...` at module level replaces the method the rewrite
    writes when the module runs: refused, naming the line."""
    autoencoders = make_tree(tmp_path)
    text = (autoencoders / file).read_text() + f"\n\n{target} = None\n"
    (autoencoders / file).write_text(text)
    err = refused(tmp_path, capsys)
    assert (
        f"{file}: line {line_of(text, f'{target} =')}: {target} is bound there by other code than tileblend's" in err
    )


def test_a_hard_link_is_one_file_under_two_names(tmp_path, capsys):
    """Two paths of one inode (a hard link) are one file, as a symbolic link is: one line names both."""
    first = tmp_path / "a.py"
    first.write_text("x = 1\n")
    os.link(first, tmp_path / "b.py")
    with pytest.raises(SourceError, match="a.py and .*b.py are the same file"):
        one_name_per_file([first, tmp_path / "b.py"])
    one_name_per_file([first, tmp_path / "new.py"])  # a file to create has no other name

    autoencoders = make_tree(tmp_path / "tree")
    os.link(autoencoders / "tiny.py", autoencoders / "tiny_alias.py")
    err = refused(tmp_path / "tree", capsys)
    assert "tiny.py and " in err and "tiny_alias.py are the same file" in err


def test_comments_inside_a_replaced_loop_are_reported(tmp_path, capsys):
    """A loop is replaced whole, by design: a comment inside it goes with it, and the report says which line."""
    autoencoders = make_tree(tmp_path)
    model = MODEL.replace("        for y in", "        # the seam\n        for y in", 1)
    (autoencoders / "tiny.py").write_text(model)
    line = line_of(model, "        # the seam")
    assert tileblend(["rewrite", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"tiny.py: rewritten (comments dropped: line {line}): TinyVAE.blend_v\n" in out
    assert "tiny.py: rewritten: TinyVAE.blend_h, Standalone.blend_v\n" in out
    assert "# the seam" not in (autoencoders / "tiny.py").read_text()

    make_tree(tmp_path / "inherit")
    (tmp_path / "inherit" / autoencoders.relative_to(tmp_path) / "tiny.py").write_text(model)
    assert tileblend(["rewrite", str(tmp_path / "inherit"), "--inherit"]) == 0
    assert (
        f"tiny.py: deleted (inherited) (comments dropped: line {line}): TinyVAE.blend_v\n" in capsys.readouterr().out
    )

    vae = (
        VAE + "\n" + LOOP.format(name="blend_h", k=-1, v="x", index=":, :, :, x", a_index=":, :, :, -blend_extent + x")
    )
    vae = vae.replace("        for x in", "        # mine\n        for x in")
    make_tree(tmp_path / "mixin")
    (tmp_path / "mixin" / autoencoders.relative_to(tmp_path) / "vae.py").write_text(vae)
    assert tileblend(["rewrite", str(tmp_path / "mixin")]) == 0
    expected = f"AutoencoderMixin.blend_v/h/t: written (comments dropped: line {line_of(vae, '        # mine')})\n"
    assert expected in capsys.readouterr().out


IMPORT = "from .testing_utils import AutoencoderTesterMixin\n"
ADDED = "AutoencoderTilingBlendTesterMixin"
KEPT_IMPORTS = {
    "end-of-line": (
        "from .testing_utils import AutoencoderTesterMixin  # noqa: F401\n",
        f"from .testing_utils import AutoencoderTesterMixin, {ADDED}  # noqa: F401\n",
    ),
    "parenthesised": (
        "from .testing_utils import (\n    # the base\n    AutoencoderTesterMixin,  # why\n    zeta\n)\n",
        f"from .testing_utils import (\n    # the base\n    AutoencoderTesterMixin,  # why\n    {ADDED},\n    zeta\n)\n",
    ),
    "unsorted": (
        "from .testing_utils import zeta, AutoencoderTesterMixin\n",
        f"from .testing_utils import {ADDED}, zeta, AutoencoderTesterMixin\n",
    ),
}


@pytest.mark.parametrize(("statement", "expected"), KEPT_IMPORTS.values(), ids=KEPT_IMPORTS.keys())
def test_an_import_the_rewrite_adds_to_keeps_its_comments_and_order(
    tmp_path, capsys, monkeypatch, statement, expected
):
    """A name added to a user's `from ... import` goes in without rewriting the statement: its comments stay where
    they are and its names keep their order."""
    tests = layout_with_tests(tmp_path, monkeypatch)
    module = tests / "test_models_tiny.py"
    module.write_text(module.read_text().replace(IMPORT, statement))
    assert tileblend(["rewrite", str(tmp_path)]) == 0
    assert expected in module.read_text()


MOVED_COMMENTS = {
    "split-otherwise": "from .testing_utils import (AutoencoderTesterMixin,  # why\n    zeta)\n",
    "too-long": f"from .testing_utils import AutoencoderTesterMixin, {'z' * 40}  # noqa: F401\n",
}


@pytest.mark.parametrize("statement", MOVED_COMMENTS.values(), ids=MOVED_COMMENTS.keys())
def test_an_import_whose_comment_would_move_is_refused(tmp_path, capsys, monkeypatch, statement):
    """Where the name cannot go in without moving a comment (a statement split otherwise than one name per line, or
    one line that would have to be split), the rewrite stops, naming the line."""
    tests = layout_with_tests(tmp_path, monkeypatch)
    module = tests / "test_models_tiny.py"
    module.write_text(module.read_text().replace(IMPORT, statement))
    err = refused(tmp_path, capsys)
    assert "test_models_tiny.py: line 1: the import from .testing_utils holds a comment or other code" in err


LIST_EDITS = {
    "comment": ("    (", "    # mine\n    (", 1),
    "row-commented": ('"blend_h"),\n', '"blend_h"),  # mine\n', 1),
    "row-added": ("BLEND_METHODS = [\n", "BLEND_METHODS = [\n    ('tiny', 'Mine', 'blend_v'),\n", 1),
}


@pytest.mark.parametrize("edit", LIST_EDITS.values(), ids=LIST_EDITS.keys())
def test_an_edit_of_the_standalone_modules_list_is_refused(tmp_path, capsys, edit):
    """The rows of methods in the standalone test module are tileblend's only while they are exactly as it writes
    them: a comment or a row of another form there is someone's work, which a rerun does not
    replace."""
    from tileblend.upstream.standalone_test import TEST_MODULE_PATH

    make_tree(tmp_path)
    (tmp_path / TEST_MODULE_PATH).parent.mkdir(parents=True)
    assert tileblend(["rewrite", str(tmp_path)]) == 0
    module = tmp_path / TEST_MODULE_PATH
    start = module.read_text().index("BLEND_METHODS = [")
    text = module.read_text()
    edited = text[:start] + text[start:].replace(*edit)
    assert edited != text
    module.write_text(edited)
    err = refused(tmp_path, capsys)
    assert f"{module}: it is not the module tileblend writes (edited, or someone else's)" in err


def earlier(text: str) -> str:
    """A generated text as an earlier tileblend might have written it: a comment below its first line."""
    return text.replace(":\n", ":\n    # Earlier\n", 1)


def test_an_earlier_test_text_is_refreshed(tmp_path, capsys, monkeypatch):
    """Test definitions an earlier tileblend wrote (the row loop, the tester mixin, a test class) are refreshed once
    their texts are listed in `written_tests.EARLIER`; unlisted, they stop the rewrite like any edit."""
    from tileblend.upstream import test_files, written_tests
    from tileblend.upstream.written_methods import digest

    layout_with_tests(tmp_path, monkeypatch)
    current = {"REFERENCE": test_files.REFERENCE, "MIXIN": test_files.MIXIN, "test_class": test_files.test_class}
    monkeypatch.setattr(test_files, "REFERENCE", earlier(current["REFERENCE"]))
    monkeypatch.setattr(test_files, "MIXIN", earlier(current["MIXIN"]))
    monkeypatch.setattr(test_files, "test_class", lambda *args: earlier(current["test_class"](*args)))
    assert tileblend(["rewrite", str(tmp_path)]) == 0
    written = files_of(tmp_path)
    assert sum(text.count("# Earlier\n") for text in written.values()) == 3
    for name, text in current.items():
        monkeypatch.setattr(test_files, name, text)
    assert ": blend_row_loop is not the text tileblend writes" in refused(tmp_path, capsys)

    listed = [earlier(current["REFERENCE"]), earlier(current["MIXIN"])]
    listed.append(earlier(current["test_class"]("TinyVAE", "TinyVAETesterConfig", test_files.CASES["TinyVAE"])))
    monkeypatch.setattr(written_tests, "EARLIER", written_tests.EARLIER | {digest(text) for text in listed})
    assert tileblend(["rewrite", str(tmp_path)]) == 0
    assert not any("# Earlier" in text for text in files_of(tmp_path).values())
    assert tileblend(["rewrite", str(tmp_path)]) == 0 and "0 files changed" in capsys.readouterr().out


def test_an_earlier_standalone_module_is_refreshed(tmp_path, capsys, monkeypatch):
    """The standalone test module an earlier tileblend wrote is refreshed once its template is listed in
    `written_tests.EARLIER` (its rows still exactly the ones for the tree); unlisted, it stops the rewrite."""
    from tileblend.upstream import standalone_test, written_tests
    from tileblend.upstream.written_methods import digest

    make_tree(tmp_path)
    module = tmp_path / standalone_test.TEST_MODULE_PATH
    module.parent.mkdir(parents=True)
    current = standalone_test.TEMPLATE
    earlier_template = current.replace("import importlib\n", "import importlib  # earlier\n")
    monkeypatch.setattr(standalone_test, "TEMPLATE", earlier_template)
    assert tileblend(["rewrite", str(tmp_path)]) == 0 and "# earlier" in module.read_text()
    monkeypatch.setattr(standalone_test, "TEMPLATE", current)
    assert "it is not the module tileblend writes" in refused(tmp_path, capsys)
    monkeypatch.setattr(written_tests, "EARLIER", written_tests.EARLIER | {digest(earlier_template)})
    assert tileblend(["rewrite", str(tmp_path)]) == 0 and "# earlier" not in module.read_text()
