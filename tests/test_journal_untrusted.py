"""A journal found in a checkout is input like any file there: recovery checks it before touching anything.

A checkout can come with a `.tileblend-transaction.json` (a tarball, a branch). Each command that recovers a killed
write (`tileblend rewrite`, `python -m tileblend.upstream.transaction`, the copy checker's `--fix_and_overwrite`) must
refuse a journal that is not a regular file, that this user's tileblend did not sign, or that is not in the form it
writes: exit 2, one line naming the journal, and every file, the journal included, as it was. The checks behind the
signature (paths outside the tree or through a link, ids, temporary files) are tested on signed journals: they hold
even for a journal signed with the user's key.
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tileblend.cli import main as tileblend
from tileblend.upstream import copies, journal, transaction
from tileblend.upstream.journal import JOURNAL, JOURNAL_FORMAT
from tileblend.upstream.source_files import SourceFile


VICTIM = b"a file outside the checkout\n"
COMMANDS = {
    "rewrite": lambda root: tileblend(["rewrite", str(root)]),
    "recovery": lambda root: transaction.main([str(root)]),
    "fix-copies": lambda root: copies.main(["--path", str(root), "--fix_and_overwrite"]),
}


def snapshot(*roots: Path) -> dict[str, bytes | str]:
    """Every path under `roots`: a file's bytes, a link's target, or "dir"."""
    found = {}
    for root in roots:
        for path in [root, *sorted(root.rglob("*"))]:
            if path.is_symlink():
                found[str(path)] = os.readlink(path)
            elif path.is_file():
                found[str(path)] = path.read_bytes()
            else:
                found[str(path)] = "dir"
    return found


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A small checkout at tmp_path/checkout; tmp_path/victim holds files outside it."""
    package = tmp_path / "checkout" / "src" / "diffusers"
    (package / "models" / "autoencoders").mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "0.42.1"\n')
    (package / "models" / "autoencoders" / "vae.py").write_text("x = 1\n")
    (tmp_path / "victim").mkdir()
    for name in ["victim.py", "x.new"]:
        (tmp_path / "victim" / name).write_bytes(VICTIM)
    return tmp_path / "checkout"


def write_journal(root: Path, signed: bool = True, **state) -> None:
    """A journal in phase "replacing" listing no file, with the keys of `state` changed, signed with this user's key
    (or, with `signed=False`, as a tree would bring it: with a signature made with another key)."""
    state = {"format": JOURNAL_FORMAT, "id": "0123abcd", "phase": "replacing", "files": [], **state}
    state["mac"] = journal._signature(state, journal.journal_key() if signed else b"another key")
    (root / JOURNAL).write_text(json.dumps(state))


def assert_refused(command: str, root: Path, capsys, reason: str) -> None:
    before = snapshot(root.parent)
    assert COMMANDS[command](root) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and f"refused {root / JOURNAL}: " in err and reason in err, err
    assert "nothing was touched" in err
    assert snapshot(root.parent) == before


DIGEST = hashlib.sha256(VICTIM).hexdigest()
LEADING_OUT = {
    "dot-dot": ("../victim/victim.py", "is not a plain relative path"),
    "absolute": (None, "is not a plain relative path"),  # the victim's absolute path
    "link": ("src/out/victim.py", "leads out of the tree"),  # src/out links to the victim's folder
}


def test_a_journal_that_came_with_the_tree_is_refused(tmp_path, capsys):
    """A tree ships a journal "replacing" vae.py (listed with the digest of its upstream text) and the `.orig` to put
    back: well formed and inside the tree, it is refused for its signature, and vae.py keeps its text."""
    package = tmp_path / "checkout" / "src" / "diffusers"
    vae = package / "models" / "autoencoders" / "vae.py"
    vae.parent.mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "0.42.1"\n')
    vae.write_text("x = 1\n")
    (vae.parent / ".vae.py.tileblend-0123abcd.orig").write_text("import os  # the tree's own code\n")
    files = [["src/diffusers/models/autoencoders/vae.py", True, hashlib.sha256(b"x = 1\n").hexdigest()]]
    write_journal(tmp_path / "checkout", signed=False, files=files)
    for command in COMMANDS:
        assert_refused(command, tmp_path / "checkout", capsys, "it is not signed with this user's key")
    assert vae.read_text() == "x = 1\n"


def test_the_read_only_commands_take_a_relative_path_to_a_signed_journal(checkout, monkeypatch, capsys):
    """This user's own journal, the tree named relatively (or through a link): recovery resolves the tree before it
    checks the journal's paths, and so do the commands that only describe it."""
    vae = "src/diffusers/models/autoencoders/vae.py"
    write_journal(checkout, files=[[vae, True, hashlib.sha256(b"x = 1\n").hexdigest()]])
    monkeypatch.chdir(checkout.parent)
    assert tileblend(["rewrite", "checkout", "--check"]) == 2
    assert copies.main(["--path", "checkout"]) == 2
    err = capsys.readouterr().err
    assert err.count("a write was interrupted") == 2 and "refused" not in err, err


@pytest.mark.parametrize(
    "command",
    [["rewrite", "--check"], ["rewrite", "--diff"], ["check_copies"]],
    ids=["rewrite-check", "rewrite-diff", "check-copies"],
)
def test_the_read_only_commands_name_a_refused_journal(checkout, command, capsys):
    """The commands that do not recover check the journal too: one they would not recover is refused, not called
    "a write was interrupted", which sends the user to a recovery that refuses it."""
    write_journal(checkout, signed=False)
    before = snapshot(checkout.parent)
    if command[0] == "rewrite":
        assert tileblend([command[0], str(checkout), command[1]]) == 2
    else:
        assert copies.main(["--path", str(checkout)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and f"refused {checkout / JOURNAL}: it is not signed" in err, err
    assert snapshot(checkout.parent) == before


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("path", LEADING_OUT)
def test_a_path_leading_out_of_the_tree_is_refused(checkout, command, path, capsys):
    """Each listed path holds the content the journal names: without the checks, recovery deletes it."""
    relative, reason = LEADING_OUT[path]
    (checkout / "src" / "out").symlink_to(checkout.parent / "victim")
    write_journal(checkout, files=[[relative or str(checkout.parent / "victim" / "victim.py"), False, DIGEST]])
    assert_refused(command, checkout, capsys, reason)


def test_a_link_inside_the_tree_is_refused(checkout, capsys):
    (checkout / "src" / "alias").symlink_to("diffusers")
    vae = "src/alias/models/autoencoders/vae.py"
    write_journal(checkout, files=[[vae, True, hashlib.sha256(b"x = 1\n").hexdigest()]])
    assert_refused("rewrite", checkout, capsys, "passes through a link")


def test_an_id_that_tileblend_does_not_make_is_refused(checkout, capsys):
    """The id names the temporary files: `q/../../../../victim/x` would delete victim/x.new through a folder the tree
    ships."""
    (checkout / "src" / "diffusers" / ".a.py.tileblend-q").mkdir()
    write_journal(checkout, files=[["src/diffusers/a.py", True, DIGEST]], phase="staging", id="q/../../../../victim/x")
    assert_refused("recovery", checkout, capsys, "its id 'q/../../../../victim/x' is not one tileblend makes")


@pytest.mark.parametrize("kind", ["new", "orig"])
def test_a_temporary_file_that_is_a_link_is_refused(checkout, kind, capsys):
    vae = checkout / "src/diffusers/models/autoencoders/vae.py"
    (vae.parent / f".vae.py.tileblend-0123abcd.{kind}").symlink_to(checkout.parent / "victim" / "victim.py")
    write_journal(checkout, files=[["src/diffusers/models/autoencoders/vae.py", True, DIGEST]])
    assert_refused("fix-copies", checkout, capsys, f".vae.py.tileblend-0123abcd.{kind} is not a regular file")


UNREADABLE = {
    "cut short": (b'{"format": "tileblend trans', "it is not JSON"),
    "older format": ({"format": "tileblend transaction 1"}, "its format is 'tileblend transaction 1'"),
    "missing key": (
        json.dumps({"format": JOURNAL_FORMAT, "id": "0123abcd", "files": []}).encode(),
        "a journal's keys",
    ),
    "deeply nested": (b"[" * 100000 + b"]" * 100000, "it is not JSON"),
    "control character": ({"files": [["src/a\x1b[31m.py", True, DIGEST]]}, "is not a plain relative path"),
    "name too long": ({"files": [[f"src/{'a' * 300}.py", True, DIGEST]]}, "cannot look at"),
    "unknown phase": ({"phase": "done"}, "its phase 'done' is not one of"),
    "bad digest": ({"files": [["src/diffusers/__init__.py", True, "0"]]}, "its files are not a list of"),
    "not Python": ({"files": [["README.md", False, DIGEST]]}, "is not a Python file"),
    "listed twice": ({"files": [["src/diffusers/__init__.py", True, DIGEST]] * 2}, "it lists a file twice"),
}


@pytest.mark.parametrize("case", UNREADABLE)
def test_a_journal_recovery_cannot_read_is_kept(checkout, case, capsys):
    """Never thrown away as "stopped before it staged anything": it stays for the user (docs/upstream-pr.md)."""
    content, reason = UNREADABLE[case]
    if isinstance(content, bytes):
        (checkout / JOURNAL).write_bytes(content)
    else:
        write_journal(checkout, **content)
    assert_refused("rewrite", checkout, capsys, reason)


@pytest.mark.parametrize("kind", ["symlink", "directory"])
def test_a_journal_that_is_not_a_regular_file_is_refused(checkout, kind, capsys):
    if kind == "symlink":
        (checkout.parent / "victim" / "journal.json").write_text("{}")
        (checkout / JOURNAL).symlink_to(checkout.parent / "victim" / "journal.json")
    else:
        (checkout / JOURNAL).mkdir()
    assert_refused("rewrite", checkout, capsys, "it is not a regular file")


def test_a_fifo_journal_is_refused_without_blocking(checkout):
    os.mkfifo(checkout / JOURNAL)
    command = [sys.executable, "-m", "tileblend", "rewrite", str(checkout)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr == (
        f"tileblend rewrite: error: refused {checkout / JOURNAL}: it is not a regular file; nothing was touched "
        "(docs/upstream-pr.md says what to do)\n"
    )


def test_a_write_never_follows_a_link_left_at_the_journal_s_temporary_name(tmp_path):
    """A checkout that ships `.tileblend-transaction.json.tmp` as a link: the write replaces the link, never the file
    it points to."""
    (tmp_path / "tree").mkdir()
    (tmp_path / "outside.txt").write_bytes(VICTIM)
    (tmp_path / "tree" / f"{JOURNAL}.tmp").symlink_to(tmp_path / "outside.txt")
    transaction.write_files([SourceFile(tmp_path / "tree" / "a.py", "a = 2\n")], tree=tmp_path / "tree")
    assert (tmp_path / "outside.txt").read_bytes() == VICTIM
    assert sorted(os.listdir(tmp_path / "tree")) == ["a.py"] and (tmp_path / "tree" / "a.py").read_text() == "a = 2\n"
