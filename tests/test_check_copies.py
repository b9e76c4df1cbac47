"""`tileblend.upstream.copies` (`utils/check_copies.py`) on small hand-written trees: resolution, comparison,
patterns, fixing and refusals."""

import os
import shutil
from pathlib import Path

import diffusers
import pytest

from tileblend.upstream import copies as check_copies


SOURCE = """\
class Base:
    def scale(self, x):
        y = x * 2
        return y + 1

    def padded(
        self,
        x,
        width: int = 3,
    ) -> int:
        return x + width


def helper(x):
    return x - 1
"""


def make_tree(root: Path, copy: str) -> Path:
    package = root / "src" / "diffusers"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "source.py").write_text(SOURCE)
    (package / "copy.py").write_text(copy)
    return package / "copy.py"


@pytest.fixture
def run():
    """`utils/check_copies.py --path ROOT [args]`, returning its exit code."""

    def run(root: Path, *args) -> int:
        return check_copies.main(["--path", str(root), *args])

    return run


GOOD_COPY = """\
class Other:
    # Copied from diffusers.source.Base.scale
    def scale_other(self, value):
        y = x * 2
        return y + 1

    def after(self):
        return 0
"""


def test_body_copy_passes_with_a_different_def_line(run, tmp_path):
    make_tree(tmp_path, GOOD_COPY)
    assert run(tmp_path) == 0


def test_mismatch_is_listed_and_fixed(run, tmp_path, capsys):
    path = make_tree(tmp_path, GOOD_COPY.replace("return y + 1", "return y + 2"))
    assert run(tmp_path) == 1
    out = capsys.readouterr().out
    assert f"{path}:2: copy differs from diffusers.source.Base.scale" in out
    assert path.read_text() != GOOD_COPY
    assert run(tmp_path, "--fix_and_overwrite") == 0
    assert path.read_text() == GOOD_COPY


def test_multi_line_signature_is_compared(run, tmp_path):
    copy = """\
class Other:
    # Copied from diffusers.source.Base.padded
    def padded(
        self,
        x,
        width: int = 4,
    ) -> int:
        return x + width
"""
    path = make_tree(tmp_path, copy)
    assert run(tmp_path) == 1
    assert run(tmp_path, "--fix_and_overwrite") == 0
    assert "width: int = 3," in path.read_text()


def test_end_copy_ends_the_compared_lines(run, tmp_path):
    copy = """\
class Other:
    # Copied from diffusers.source.Base.scale
    def scale(self, x):
        y = x * 2
        return y + 1
        # End copy
        print("not part of the copy")
"""
    make_tree(tmp_path, copy)
    assert run(tmp_path) == 0


def test_patterns_with_all_casing_and_ruff_formatting(run, tmp_path):
    copy = """\
class Other:
    # Copied from diffusers.source.Base.scale with y->result_value_{} all-casing
    def scale(self, x):
        placeholder = 0
"""
    long_name = "result_value_" + "x" * 100
    path = make_tree(tmp_path, copy.replace("{}", "x" * 100))
    assert run(tmp_path) == 1
    assert run(tmp_path, "--fix_and_overwrite") == 0
    text = path.read_text()
    assert f"        {long_name} = (\n            x * 2\n        )\n" in text  # too long: ruff wrapped it
    assert f"        return (\n            {long_name}\n            + 1\n        )\n" in text
    assert run(tmp_path) == 0


def test_copies_of_copies_are_fixed_until_they_agree(run, tmp_path):
    copy = GOOD_COPY.replace("return y + 1", "return y + 5") + (
        "\n\nclass Third:\n    # Copied from diffusers.copy.Other.scale_other\n    def scale(self, x):\n        pass\n"
    )
    path = make_tree(tmp_path, copy)
    assert run(tmp_path, "--fix_and_overwrite") == 0
    assert path.read_text().count("        return y + 1\n") == 2
    assert run(tmp_path) == 0


@pytest.mark.parametrize(
    "copy, message",
    [
        (GOOD_COPY.replace("source.Base.scale", "source.helper"), "is at depth 0, its copy at depth 1"),
        (GOOD_COPY.replace("source.Base.scale", "source.Base.missing"), "diffusers.source.Base.missing not found"),
        (GOOD_COPY.replace("source.Base.scale", "nowhere.Base.scale"), "no module of diffusers.nowhere.Base.scale"),
        (GOOD_COPY.replace("Base.scale", "Base.scale with y->)("), "ruff cannot format"),
    ],
)
def test_unsafe_copies_are_refused_without_writing(run, tmp_path, capsys, copy, message):
    path = make_tree(tmp_path, copy)
    assert run(tmp_path, "--fix_and_overwrite") == 2
    assert message in capsys.readouterr().err
    assert path.read_text() == copy


def test_read_only_file_is_refused(run, tmp_path, capsys):
    copy = GOOD_COPY.replace("return y + 1", "return y + 2")
    path = make_tree(tmp_path, copy)
    path.chmod(0o444)
    assert run(tmp_path, "--fix_and_overwrite") == 2
    assert "is read-only" in capsys.readouterr().err
    assert path.read_text() == copy


STALE_MIXIN_COPY = (
    "class Mine:\n"
    "    # Copied from diffusers.models.autoencoders.vae.AutoencoderMixin.disable_tiling\n"
    "    def disable_tiling(self):\n"
    "        pass\n"
)


def test_a_tree_that_is_not_diffusers_is_an_error(run, tmp_path, capsys):
    (tmp_path / "src").mkdir()
    path = tmp_path / "src" / "mixin.py"
    path.write_text(STALE_MIXIN_COPY)
    assert run(tmp_path, "--fix_and_overwrite") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path} is not a diffusers checkout" in err
    assert path.read_text() == STALE_MIXIN_COPY


def test_copies_in_a_diffusers_package_resolve_in_that_package(run, tmp_path, capsys):
    package = tmp_path / "diffusers"
    shutil.copytree(Path(diffusers.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    path = package / "models" / "autoencoders" / "mine.py"
    path.write_text(STALE_MIXIN_COPY)
    assert run(package) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        f"{path}:2: copy differs from diffusers.models.autoencoders.vae.AutoencoderMixin.disable_tiling"
    )
    assert run(package, "--fix_and_overwrite") == 0
    assert "        self.use_tiling = False\n" in path.read_text()
    assert run(package) == 0


def test_missing_path(run, tmp_path, capsys):
    assert run(tmp_path / "missing") == 2
    assert "is not a directory" in capsys.readouterr().err


def test_fix_is_all_or_nothing(run, tmp_path, capsys, monkeypatch):
    """Two files to fix and the second replacement fails: the first file is put back, and the error says so."""
    copy = GOOD_COPY.replace("return y + 1", "return y + 2")
    path = make_tree(tmp_path, copy)
    second = path.with_name("second.py")
    second.write_text(copy)
    replace, calls = os.replace, []

    def failing(source, target):
        if not str(target).endswith(".py"):  # the journal's updates
            return replace(source, target)
        calls.append(target)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        replace(source, target)

    monkeypatch.setattr(os, "replace", failing)
    assert run(tmp_path, "--fix_and_overwrite") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing was written (files replaced before it, put back: 1)" in err
    assert path.read_text() == copy and second.read_text() == copy


def test_fix_keeps_an_edit_made_after_reading(run, tmp_path, capsys, monkeypatch):
    """A file edited between reading and writing stops the fix: nothing written, the edit kept, one line naming it."""
    copy = GOOD_COPY.replace("return y + 1", "return y + 2")
    path = make_tree(tmp_path, copy)
    write_files = check_copies.write_files

    def edit_then_write(*args, **kwargs):  # the user saves the file while the fixer runs
        path.write_text(copy + "# edited meanwhile\n")
        write_files(*args, **kwargs)

    monkeypatch.setattr(check_copies, "write_files", edit_then_write)
    assert run(tmp_path, "--fix_and_overwrite") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path.resolve()} changed since it was read; nothing was written" in err
    assert path.read_text() == copy + "# edited meanwhile\n"


def test_fix_refuses_a_copy_that_links_out_of_the_tree(run, tmp_path, capsys):
    copy = GOOD_COPY.replace("return y + 1", "return y + 2")
    outside = tmp_path / "outside.py"
    outside.write_text(copy)
    path = make_tree(tmp_path / "checkout", "")
    path.unlink()
    path.symlink_to(outside)
    assert run(tmp_path / "checkout", "--fix_and_overwrite") == 2
    assert "links to" in capsys.readouterr().err and outside.read_text() == copy


def test_fix_refuses_a_module_under_two_names(run, tmp_path, capsys):
    """A symbolic link in the tree to a module with a copy to fix: two paths, one file, which the fix would write
    twice. One line names both paths; nothing is written."""
    path = make_tree(tmp_path, GOOD_COPY.replace("return y + 1", "return y + 2"))
    alias = path.with_name("copy_alias.py")
    alias.symlink_to(path.name)
    before = path.read_text()
    assert run(tmp_path, "--fix_and_overwrite") == 2
    err = capsys.readouterr().err
    assert f"{path} and {alias} are the same file" in err and "nothing was written" in err and err.count("\n") == 1
    assert path.read_text() == before and alias.is_symlink()
    assert not [name for name in os.listdir(path.parent) if ".tileblend-" in name]


def test_crlf_and_bom_files_keep_their_bytes(run, tmp_path):
    """A CRLF copy with a BOM of an LF source: it passes as is, and a fix keeps its BOM and line endings."""
    path = make_tree(tmp_path, "")
    bom_crlf = b"\xef\xbb\xbf" + GOOD_COPY.replace("\n", "\r\n").encode()
    path.write_bytes(bom_crlf)
    assert run(tmp_path) == 0

    mixed = bom_crlf.replace(b"        return y + 1\r\n", b"        return y + 2\n")  # one LF line, the one to fix
    path.write_bytes(mixed)
    assert run(tmp_path) == 1
    assert run(tmp_path, "--fix_and_overwrite") == 0
    assert path.read_bytes() == bom_crlf  # the fixed lines take the file's dominant ending
    assert run(tmp_path) == 0
