"""A write stopped at each phase by a signal, or killed: the tree ends all old or all new, with no file of ours left.

Each case runs the write in a child process that signals itself at a chosen point (`KILLER`): right after the journal
is created, while staging, right after the journal says "replacing", after two of the files were replaced, after the
journal says "committed", and in the middle of the roll-back a SIGTERM started. A signal Python can catch must leave
the tree as it was (or, after the commit, fully written) at once; after SIGKILL the next write's `recover` must.
"""

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tileblend.upstream import copies as check_copies
from tileblend.upstream.journal import JOURNAL
from tileblend.upstream.transaction import recover


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path

    from tileblend.upstream import journal, transaction

    phase, signum, ignored, command = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "ignored", sys.argv[4:]
    # As in a terminal, whatever started the suite (a background job ignores SIGINT, nohup SIGHUP); or, with
    # "ignored", as under nohup.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    if ignored:
        signal.signal(signum, signal.SIG_IGN)
    replace, stage, counts = os.replace, transaction._stage, {"stage": 0, "module": 0, "journal": 0, "restore": 0}


    def kill(sent=signum):
        os.kill(os.getpid(), sent)


    def staging(path, data, like):
        stage(path, data, like)
        counts["stage"] += 1
        if phase == "staging" and counts["stage"] == 3:
            kill()


    def replacing(source, target):
        if str(source).endswith(".orig"):  # a roll-back puts a file back
            counts["restore"] += 1
            if phase == "rolling-back" and counts["restore"] == 1:
                kill(signal.SIGKILL)
        replace(source, target)
        kind = "journal" if str(target).endswith(journal.JOURNAL) else "module"
        counts[kind] += 1
        if (phase, kind, counts[kind]) in {
            ("created", "journal", 1),
            ("replacing-started", "journal", 2),
            ("replaced-two", "module", 2),
            ("rolling-back", "module", 2),
            ("committed", "journal", 3),
        }:
            kill()


    transaction._stage, os.replace = staging, replacing
    from tileblend.cli import main

    sys.exit(main(command))
    """
)
PHASES = ["created", "staging", "replacing-started", "replaced-two", "committed"]


def tree_files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def ours(root: Path) -> list[str]:
    """Files of tileblend's transactions left in `root`."""
    return [str(path) for path in root.rglob("*") if ".tileblend-" in path.name or path.name.startswith(JOURNAL)]


def killed_rewrite(root: Path, phase: str, signum: int, tmp_path: Path, ignored: bool = False):
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    command = [
        sys.executable,
        str(script),
        phase,
        str(signum),
        "ignored" if ignored else "caught",
        "rewrite",
        str(root),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> tuple[Path, dict[str, bytes], dict[str, bytes]]:
    """(a small diffusers checkout, its files, its files once rewritten)."""
    from test_rewrite import INSTALLED, link_tree

    pristine = tmp_path_factory.mktemp("pristine")
    package = pristine / "src" / "diffusers"
    for relative in ["__init__.py", "models/autoencoders/vae.py", "models/autoencoders/autoencoder_kl.py"]:
        (package / relative).parent.mkdir(parents=True, exist_ok=True)
        (package / relative).write_bytes((INSTALLED / relative).read_bytes())
    for name in ["autoencoder_kl_wan.py", "autoencoder_kl_cogvideox.py", "autoencoder_kl_mochi.py"]:
        (package / "models/autoencoders" / name).write_bytes((INSTALLED / "models/autoencoders" / name).read_bytes())
    rewritten = link_tree(pristine, tmp_path_factory.mktemp("rewritten") / "checkout")
    assert (
        subprocess.run([sys.executable, "-m", "tileblend", "rewrite", str(rewritten)], capture_output=True).returncode
        == 0
    )
    return pristine, tree_files(pristine), tree_files(rewritten)


def fresh(trees, tmp_path: Path) -> Path:
    from test_rewrite import link_tree

    return link_tree(trees[0], tmp_path / "checkout")


CAUGHT = [(phase, signal.SIGTERM) for phase in PHASES] + [("replaced-two", signal.SIGHUP), ("staging", signal.SIGINT)]


@pytest.mark.parametrize("phase, signum", CAUGHT)
def test_a_caught_signal_rolls_back_at_once(trees, tmp_path, phase, signum):
    root = fresh(trees, tmp_path)
    result = killed_rewrite(root, phase, signum, tmp_path)
    name = signal.Signals(signum).name
    assert result.returncode == 128 + signum, result.stderr
    if phase == "committed":  # the signal came after the last replacement: the write finishes, then stops
        assert result.stderr == f"tileblend rewrite: interrupted by {name}; every file was written\n"
        assert tree_files(root) == trees[2]
    else:
        assert result.stderr == f"tileblend rewrite: interrupted by {name}; nothing was written\n"
        assert tree_files(root) == trees[1]
    assert ours(root) == []


@pytest.mark.parametrize("phase", [*PHASES, "rolling-back"])
def test_after_sigkill_the_next_rewrite_recovers_first(trees, tmp_path, phase, capsys):
    """Killed (SIGKILL; in "rolling-back" a SIGTERM's roll-back is killed halfway): `rewrite --check` refuses, the next
    `rewrite` finishes the old transaction (rolled back, or cleaned up after its commit), says so, then rewrites."""
    from tileblend.cli import main as tileblend

    root = fresh(trees, tmp_path)
    result = killed_rewrite(root, phase, signal.SIGTERM if phase == "rolling-back" else signal.SIGKILL, tmp_path)
    assert result.returncode == -signal.SIGKILL
    assert (root / JOURNAL).exists() and tree_files(root) not in (trees[1], trees[2])

    assert tileblend(["rewrite", str(root), "--check"]) == 2
    assert "a write was interrupted" in capsys.readouterr().err
    assert tileblend(["rewrite", str(root)]) == 0
    err = capsys.readouterr().err
    if phase == "committed":
        assert "of a write that finished: removed its 5 leftover backups; the files stay written" in err
    else:
        assert "of an interrupted write: rolled back" in err and "the tree is as before it" in err
    assert tree_files(root) == trees[2] and ours(root) == []


def test_the_copy_checker_recovers_too(trees, tmp_path, capsys):
    root = fresh(trees, tmp_path)
    assert killed_rewrite(root, "replaced-two", signal.SIGKILL, tmp_path).returncode == -signal.SIGKILL
    assert check_copies.main(["--path", str(root)]) == 2
    assert "a write was interrupted; --fix_and_overwrite rolls it back" in capsys.readouterr().err
    check_copies.main(["--path", str(root), "--fix_and_overwrite"])  # this small tree lacks the sources of its copies
    assert "of an interrupted write: rolled back (2 files put back)" in capsys.readouterr().out
    assert tree_files(root) == trees[1] and ours(root) == []


def test_an_ignored_signal_stays_ignored(trees, tmp_path):
    """A rewrite started under `nohup` (SIGHUP ignored) is not stopped by SIGHUP: it writes every file."""
    root = fresh(trees, tmp_path)
    result = killed_rewrite(root, "replaced-two", signal.SIGHUP, tmp_path, ignored=True)
    assert result.returncode == 0, result.stderr
    assert tree_files(root) == trees[2] and ours(root) == []


def test_recovery_from_the_command_line(trees, tmp_path):
    """`make fix-copies` runs this before a checkout's own checker."""
    root = fresh(trees, tmp_path)
    assert killed_rewrite(root, "replaced-two", signal.SIGKILL, tmp_path).returncode == -signal.SIGKILL
    command = [sys.executable, "-m", "tileblend.upstream.transaction", str(root)]
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert result.returncode == 0 and "rolled back (2 files put back)" in result.stdout
    assert tree_files(root) == trees[1] and ours(root) == []


def test_recovery_keeps_a_file_changed_after_the_kill_and_finds_the_journal_from_the_package(trees, tmp_path, capsys):
    """After SIGKILL the user edits a file the write had replaced: recovery leaves the edit, keeps the original beside
    it and says so; the journal of a rewrite of the checkout is found from its package directory too."""
    from tileblend.cli import main as tileblend

    root = fresh(trees, tmp_path)
    assert killed_rewrite(root, "replaced-two", signal.SIGKILL, tmp_path).returncode == -signal.SIGKILL
    replaced = [
        path
        for path, data in tree_files(root).items()
        if path in trees[1] and data == trees[2][path] != trees[1][path]
    ]
    edited = root / replaced[0]
    edited.write_bytes(edited.read_bytes() + b"# the user's edit\n")
    assert tileblend(["rewrite", str(root / "src" / "diffusers"), "--check"]) == 2
    assert tileblend(["rewrite", str(root / "src" / "diffusers")]) == 0
    err = capsys.readouterr().err
    assert "rolled back (1 files put back); changed since, left as they are: " in err and str(edited) in err
    assert edited.read_bytes().endswith(b"# the user's edit\n")
    assert [path.name for path in edited.parent.glob(f".{edited.name}.tileblend-*.orig")] != []


def test_a_second_writer_is_refused_while_one_runs(tmp_path):
    """A write or a recovery while another tileblend write holds the tree is refused at once, touching nothing."""
    import fcntl

    from tileblend.upstream.source_files import SourceError, SourceFile
    from tileblend.upstream.transaction import write_files

    (tmp_path / "a.py").write_text("a = 1\n")
    (tmp_path / JOURNAL).write_text("{}")
    descriptor = os.open(tmp_path, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        with pytest.raises(SourceError, match="another tileblend write is running"):
            recover(tmp_path)
        (tmp_path / JOURNAL).unlink()
        with pytest.raises(SourceError, match="another tileblend write is running"):
            write_files([SourceFile(tmp_path / "a.py", "a = 2\n")], tree=tmp_path)
    finally:
        os.close(descriptor)
    assert (tmp_path / "a.py").read_text() == "a = 1\n" and sorted(os.listdir(tmp_path)) == ["a.py"]


def replaced_by_the_kill(trees, root: Path) -> list[str]:
    """The files a write killed at "replaced-two" had replaced."""
    return [
        path
        for path, data in tree_files(root).items()
        if path in trees[1] and data == trees[2][path] != trees[1][path]
    ]


def test_a_journal_cut_after_the_kill_is_kept_with_every_file(trees, tmp_path, capsys):
    """Recovery cannot know what an unreadable journal listed: it changes nothing (it used to delete the journal and
    leave a mixed tree that nothing could recover)."""
    from tileblend.cli import main as tileblend

    root = fresh(trees, tmp_path)
    assert killed_rewrite(root, "replaced-two", signal.SIGKILL, tmp_path).returncode == -signal.SIGKILL
    (root / JOURNAL).write_bytes((root / JOURNAL).read_bytes()[:40])
    before = tree_files(root)
    assert tileblend(["rewrite", str(root)]) == 2
    assert f"refused {root / JOURNAL}: it is not JSON" in capsys.readouterr().err
    assert tree_files(root) == before


def test_an_original_deleted_after_the_kill_is_named_and_the_next_rewrite_runs(trees, tmp_path, capsys):
    from tileblend.cli import main as tileblend

    root = fresh(trees, tmp_path)
    assert killed_rewrite(root, "replaced-two", signal.SIGKILL, tmp_path).returncode == -signal.SIGKILL
    lost, put_back = replaced_by_the_kill(trees, root)
    [orig] = (root / lost).parent.glob(f".{Path(lost).name}.tileblend-*.orig")
    orig.unlink()
    assert tileblend(["rewrite", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"cannot put back {root / lost} (no {orig.name} beside it)" in err and "git checkout -- FILE" in err
    assert "rolled back (1 files put back)" in err and "the journal is removed" in err
    assert tree_files(root) == {**trees[1], lost: trees[2][lost]} and ours(root) == []
    assert tileblend(["rewrite", str(root)]) == 0
    assert tree_files(root) == trees[2]


def interrupted_journal(tree: Path, files: dict[str, tuple[bytes | None, bytes]]) -> None:
    """The state a write killed after replacing every file of `files` (name: (old content or None, new content))
    leaves: new contents in place, `.orig` backups, a signed journal saying "replacing"."""
    from tileblend.upstream import journal

    planned = [(name, old is not None, hashlib.sha256(new).hexdigest()) for name, (old, new) in files.items()]
    written = journal.entries(tree, "0123abcd", planned)
    for entry, (old, new) in zip(written, files.values()):
        entry.target.write_bytes(new)
        if old is not None:
            entry.orig.write_bytes(old)
    journal.write_journal(tree, "0123abcd", "replacing", written)


def test_a_file_the_write_made_and_the_user_changed_is_named(tmp_path):
    """Recovery says "as before it" only when it is: a file the killed write created, edited since, stays and is
    named."""
    interrupted_journal(tmp_path, {"made.py": (None, b"x = 1\n"), "old.py": (b"a = 1\n", b"a = 2\n")})
    (tmp_path / "made.py").write_bytes(b"x = 'the user edited it'\n")
    found = recover(tmp_path)
    assert found.endswith(
        f"rolled back (1 files put back); changed since, left as they are: {tmp_path / 'made.py'} "
        "(made by the interrupted write)"
    )
    assert (tmp_path / "old.py").read_bytes() == b"a = 1\n" and ours(tmp_path) == []


def test_a_signal_during_recovery_waits_until_it_is_done(tmp_path, monkeypatch):
    from tileblend.upstream.transaction import Interrupted

    interrupted_journal(tmp_path, {"a.py": (b"a = 1\n", b"a = 2\n"), "b.py": (b"b = 1\n", b"b = 2\n")})
    replace = os.replace

    def interrupting(source, target):
        os.kill(os.getpid(), signal.SIGINT)
        replace(source, target)

    monkeypatch.setattr(os, "replace", interrupting)
    with pytest.raises(Interrupted) as stopped:
        recover(tmp_path)
    assert stopped.value.describe() == (
        f"interrupted by SIGINT; found {tmp_path / JOURNAL} of an interrupted write: rolled back (2 files put back); "
        "the tree is as before it; nothing else was written"
    )
    assert (tmp_path / "a.py").read_bytes() == b"a = 1\n" and (tmp_path / "b.py").read_bytes() == b"b = 1\n"
    assert ours(tmp_path) == []


def test_the_journal_s_aside_file_left_by_a_kill_is_removed(tmp_path):
    """A kill while the journal was written aside leaves that file and no journal: recovery removes it."""
    (tmp_path / f"{JOURNAL}.tmp").write_bytes(b'{"format": ')
    assert recover(tmp_path) == f"removed {tmp_path / JOURNAL}.tmp, left by a write killed before it began"
    assert ours(tmp_path) == [] and recover(tmp_path) is None


def test_an_aside_name_taken_by_a_folder_is_named(tmp_path):
    from tileblend.upstream.source_files import SourceError, SourceFile
    from tileblend.upstream.transaction import write_files

    (tmp_path / f"{JOURNAL}.tmp").mkdir()
    with pytest.raises(SourceError, match=rf"cannot write .*{JOURNAL}: .*{JOURNAL}\.tmp'; nothing was written$"):
        write_files([SourceFile(tmp_path / "a.py", "a = 2\n")], tree=tmp_path)
    assert not (tmp_path / "a.py").exists()
