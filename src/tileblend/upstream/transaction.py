"""Replace files of a diffusers tree all or nothing, also when the process is stopped or killed.

`write_files` is how `tileblend rewrite` and the copy checker write. One write is a transaction with a random id:

1. The journal, `.tileblend-transaction.json` at the top of the tree, is created listing the files, relative to the
   tree, whether each existed and the SHA-256 of its new content; its phase is "staging". Like every later update,
   it is written aside and renamed into place, so it is never seen cut short; a tree that has one is refused.
2. Next to each file, `.NAME.tileblend-ID.new` gets the new bytes (with the file's mode and owner, through symbolic
   links to the file they point to) and `.NAME.tileblend-ID.orig` a copy of the current ones.
3. The phase becomes "replacing". Each file is checked to still hold the bytes it was read with (an edit made meanwhile is never lost) and replaced
   by its `.new` file, in the given order.
4. The phase becomes "committed"; the `.orig` files and the journal are removed.

Rolling back reads the state from the files, not from memory: a file whose `.new` is still there was not replaced;
one whose `.new` is gone is put back from its `.orig` (or removed, if it was new). During steps 1-3 an error, or
SIGINT, SIGTERM or SIGHUP (raised as `Interrupted`), rolls back, removes every temporary file and the journal, and
propagates; a signal after step 3 waits until step 4 is done. After a death nothing can catch (SIGKILL, an
out-of-memory kill), `recover`, which every command that writes a tree runs first, finds the journal and finishes the
transaction the same way: rolled back before "committed", cleaned up after it.

A journal is read from the tree, so recovery trusts it no more than any file there: it must be a regular file that
`write_files` could have written (its format, an id of ours, known phase, each file a plain relative path to a Python
file reached through no link, each temporary file a regular file or none), or recovery refuses it and touches nothing.

    python -m tileblend.upstream.transaction PATH

runs `recover` on a diffusers checkout or package directory (`make fix-copies` does, before a checkout's own checker).
"""

import argparse
import array
import contextlib
import hashlib
import json
import os
import re
import secrets
import signal
import stat
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from .source_files import SourceError, SourceFile, find_package


JOURNAL = ".tileblend-transaction.json"
JOURNAL_FORMAT = "tileblend transaction 2"
PHASES = ("staging", "replacing", "committed")
TRANSACTION_ID_BYTES = 4
TRANSACTION_ID = re.compile(f"[0-9a-f]{{{2 * TRANSACTION_ID_BYTES}}}")
"""A transaction's id, `secrets.token_hex(TRANSACTION_ID_BYTES)`: it names the temporary files, so nothing else is
accepted from a journal."""
DIGEST = re.compile("[0-9a-f]{64}")
MAX_JOURNAL_BYTES = 1 << 20
"""A journal lists each file once in about a hundred bytes: a larger one is not tileblend's."""
NEW_FILE_MODE = 0o644
FS_IOC_GETFLAGS = 0x80086601
"""Linux's ioctl that reads an inode's attribute flags (what `lsattr` prints)."""
FS_APPEND_FL = 0x20
"""The append-only flag (`chattr +a`): a file can only grow, a directory's entries can be neither renamed nor removed
(an immutable one, `chattr +i`, is refused as read-only)."""
CAUGHT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
_UNCHECKED = object()
"""The `read_as` entry of a file written without checking what it holds."""


class Interrupted(KeyboardInterrupt):
    """A signal that stopped a write: `written` is False when the tree was rolled back (nothing written), True when it
    came after every file was written."""

    def __init__(self, signum: int, written: bool):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.written = written

    def describe(self) -> str:
        outcome = "every file was written" if self.written else "nothing was written"
        return f"interrupted by {signal.Signals(self.signum).name}; {outcome}"


def interruption(interrupt: KeyboardInterrupt) -> tuple[str, int]:
    """What a command that writes says and returns when `interrupt` stopped it: an `Interrupted` from inside a write
    (which says what was written), or a Ctrl-C before any write; the exit code is 128 + the signal's number."""
    if isinstance(interrupt, Interrupted):
        return interrupt.describe(), 128 + interrupt.signum
    return "interrupted; nothing was written", 128 + signal.SIGINT


class _Signals:
    """While active (in the main thread), the first of `CAUGHT_SIGNALS` that the process handles raises `Interrupted`,
    unless `holding` is set: then it is kept in `received` (and raised, as written, when the block ends without an
    error). Signals after the first are ignored: a roll-back in progress finishes."""

    def __init__(self):
        self.holding = False
        self.received = None
        self.previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            # A signal the process ignores (SIGHUP under nohup, SIGINT in a background job) stays ignored, and one
            # handled outside Python (no handler to put back) is left alone.
            handlers = {signum: signal.getsignal(signum) for signum in CAUGHT_SIGNALS}
            caught = [signum for signum, handler in handlers.items() if handler not in (signal.SIG_IGN, None)]
            self.previous = {signum: signal.signal(signum, self._handle) for signum in caught}
        return self

    def _handle(self, signum, frame):
        if self.received is None:
            self.received = signum
            if not self.holding:
                raise Interrupted(signum, written=False)

    def __exit__(self, error_type, error, traceback):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        if error_type is None and self.received is not None:
            raise Interrupted(self.received, written=True)
        return False


@contextlib.contextmanager
def _locked(tree: Path):
    """Hold an exclusive lock on the tree's directory (POSIX `flock`) while a write or a recovery runs there; a second
    one is refused at once."""
    if os.name != "posix":
        yield
        return
    import fcntl

    descriptor = os.open(tree, os.O_RDONLY)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as error:
            raise SourceError(f"another tileblend write is running in {tree}; nothing was written") from error
        yield
    finally:
        os.close(descriptor)


def transaction_root(package: Path) -> Path:
    """Where the journal of a write to the diffusers package directory `package` lives: the checkout's root when
    `package` is a checkout's `src/diffusers`, else `package`; the same whichever of the two a command was given."""
    root = package.parent.parent
    return (
        root
        if package.parent.name == "src" and (root / "src" / "diffusers").resolve() == package.resolve()
        else package
    )


@dataclass(frozen=True)
class _Entry:
    """One file of a transaction: where it is and the paths of its staged new content and backup."""

    target: Path
    existed: bool
    digest: str  # SHA-256 of the new content: a file is put back only while it still holds what the write wrote
    new: Path
    orig: Path


def _entries(tree: Path, transaction: str, files: list[tuple[str, bool, str]]) -> list[_Entry]:
    entries = []
    for relative, existed, digest in files:
        target = tree / relative
        prefix = target.parent / f".{target.name}.tileblend-{transaction}"
        entries.append(_Entry(target, existed, digest, Path(f"{prefix}.new"), Path(f"{prefix}.orig")))
    return entries


def _holds_new(entry: _Entry) -> bool:
    try:
        return hashlib.sha256(entry.target.read_bytes()).hexdigest() == entry.digest
    except FileNotFoundError:
        return False


def has_journal(tree: Path) -> bool:
    """Whether `tree` holds a journal, of any kind (a link, a FIFO: recovery refuses those, it does not skip them)."""
    return os.path.lexists(tree / JOURNAL)


def _write_journal(tree: Path, transaction: str, phase: str, entries: list[_Entry], create: bool = False) -> None:
    """Write the journal whole: written aside, then renamed over the old one, so that it is never seen cut short.
    `create` raises `FileExistsError` if there is one already (every writer holds the tree's lock, see `_locked`)."""
    if create and has_journal(tree):
        raise FileExistsError(f"{tree / JOURNAL} exists")
    files = [[entry.target.relative_to(tree).as_posix(), entry.existed, entry.digest] for entry in entries]
    data = json.dumps({"format": JOURNAL_FORMAT, "id": transaction, "phase": phase, "files": files}).encode()
    aside = tree / f"{JOURNAL}.tmp"
    _remove([aside])  # a file of that name (or a link: never followed) left by anything
    descriptor = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(aside, tree / JOURNAL)


class JournalRefused(SourceError):
    """A journal that recovery does not trust (it comes from the tree, like any file there): it is left as it is, and
    so is every other file."""


def _read_journal(tree: Path) -> tuple[str, list[_Entry]]:
    """The phase and files of the journal in `tree`, after checking that it is one `write_files` could have written
    and that every path it leads recovery to is a regular file (or none) inside `tree`, reached through no link.

    Raises `JournalRefused`, naming the journal and the first check it fails, and touches nothing."""
    journal = tree / JOURNAL

    def refuse(reason: str) -> JournalRefused:
        return JournalRefused(
            f"refused {journal}: {reason}; nothing was touched (docs/upstream-pr.md says what to do)"
        )

    if not stat.S_ISREG(os.lstat(journal).st_mode):
        raise refuse("it is not a regular file")
    if os.lstat(journal).st_size > MAX_JOURNAL_BYTES:
        raise refuse(f"it is larger than {MAX_JOURNAL_BYTES} bytes")
    try:
        state = json.loads(journal.read_bytes())
    except ValueError:
        raise refuse("it is not JSON (cut short, or not written by tileblend)") from None
    if not isinstance(state, dict) or sorted(state) != ["files", "format", "id", "phase"]:
        raise refuse("it does not hold a journal's keys (format, id, phase, files)")
    if state["format"] != JOURNAL_FORMAT:
        raise refuse(f"its format is {state['format']!r}, not {JOURNAL_FORMAT!r} (another version of tileblend?)")
    if not (isinstance(state["id"], str) and TRANSACTION_ID.fullmatch(state["id"])):
        raise refuse(f"its id {state['id']!r} is not one tileblend makes")
    if state["phase"] not in PHASES:
        raise refuse(f"its phase {state['phase']!r} is not one of {', '.join(PHASES)}")
    files = state["files"]
    if not isinstance(files, list) or not all(
        isinstance(item, list)
        and len(item) == 3
        and isinstance(item[0], str)
        and isinstance(item[1], bool)
        and isinstance(item[2], str)
        and DIGEST.fullmatch(item[2])
        for item in files
    ):
        raise refuse("its files are not a list of [path, existed, SHA-256]")
    entries = _entries(tree, state["id"], files)
    for (relative, _, _), entry in zip(files, entries):
        parts = relative.split("/")
        if relative.startswith("/") or any(part in ("", ".", "..") or "\\" in part for part in parts):
            raise refuse(f"the path {relative!r} is not a plain relative path inside the tree")
        if not relative.endswith(".py"):
            raise refuse(f"the path {relative!r} is not a Python file (the only files tileblend writes)")
        resolved = Path(os.path.realpath(entry.target))
        if resolved != entry.target:
            where = "leads out of the tree" if not resolved.is_relative_to(tree) else "passes through a link"
            raise refuse(f"the path {relative!r} {where} ({resolved})")
        for path in (entry.target, entry.new, entry.orig):
            if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
                raise refuse(f"{path} is not a regular file")
    if len({entry.target for entry in entries}) != len(entries):
        raise refuse("it lists a file twice")
    return state["phase"], entries


def _target(path: Path) -> Path:
    """The file that writing `path` changes: `path` itself, or the file a symbolic link `path` points to."""
    return Path(os.path.realpath(path))


def _attribute_flags(path: Path) -> int:
    """The inode's attribute flags on Linux (`lsattr`); 0 elsewhere and on file systems that have none."""
    if not sys.platform.startswith("linux"):
        return 0
    import fcntl

    descriptor = os.open(path, os.O_RDONLY)
    try:
        flags = array.array("l", [0])
        fcntl.ioctl(descriptor, FS_IOC_GETFLAGS, flags)
        return flags[0]
    except OSError:
        return 0
    finally:
        os.close(descriptor)


def _check_writable(path: Path) -> None:
    """Refuse files without write permission, even for a user (root) who could replace them anyway, and directories
    and files that cannot be replaced or removed (append-only), where a temporary file could not be cleaned up."""
    if path.exists() and (not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222):
        raise SourceError(f"cannot write {path}: the file is read-only; nothing was written")
    if not os.access(path.parent, os.W_OK):
        raise SourceError(f"cannot write {path}: its directory is read-only; nothing was written")
    for item, name in ((path.parent, "its directory"), (path, "the file")):
        if item.exists() and _attribute_flags(item) & FS_APPEND_FL:
            raise SourceError(f"cannot write {path}: {name} is append-only (chattr +a); nothing was written")


def _stage(path: Path, data: bytes, like: os.stat_result | None) -> None:
    """Create `path` holding `data`, with the mode and owner of `like` (a new file's mode when None)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)
    # Owners exist on POSIX only; replacing a file would give it to the running user.
    if os.name == "posix" and like is not None and (like.st_uid, like.st_gid) != (os.getuid(), os.getgid()):
        try:
            os.chown(path, like.st_uid, like.st_gid)
        except PermissionError as error:
            raise PermissionError(f"cannot keep its owner (uid {like.st_uid}, gid {like.st_gid})") from error
    os.chmod(path, like.st_mode & 0o7777 if like is not None else NEW_FILE_MODE)


def _remove(paths) -> int:
    """Remove the paths that exist and can be removed; return how many were removed."""
    removed = 0
    for path in paths:
        try:
            os.unlink(path)
            removed += 1
        except OSError:
            pass
    return removed


class ChangedSinceRead(OSError):
    """A file to be replaced no longer holds the bytes it was read with."""


def _check_unchanged(target: Path, read_as: bytes | None) -> None:
    """Raise `ChangedSinceRead` unless `target` holds `read_as` (None: unless it still does not exist)."""
    try:
        unchanged = target.read_bytes() == read_as
    except FileNotFoundError:
        unchanged = read_as is None
    if not unchanged:
        raise ChangedSinceRead(f"{target} changed since it was read")


def _roll_back(entries: list[_Entry], replacing: bool) -> tuple[int, list[str], list[str], list[str]]:
    """Undo a transaction from what the files show: (files put back, the targets that could not be, the targets left
    as they are because they changed after the write: their originals stay in their `.orig` files, the targets that
    hold the write's content but whose original is gone: nothing can put them back)."""
    put_back, failed, changed, lost = 0, [], [], []
    for entry in entries:
        if not replacing or entry.new.exists():  # not replaced
            _remove([entry.new, entry.orig])
            continue
        if not entry.target.exists() and not entry.orig.exists():
            continue  # a new file never written, or one already put back by a roll-back that was stopped
        if not _holds_new(entry):
            if entry.orig.exists():  # else it was put back already, by a roll-back that was stopped
                changed.append(f"{entry.target} (its original is in {entry.orig})")
            continue
        if entry.existed and not entry.orig.exists():
            lost.append(f"{entry.target} (no {entry.orig.name} beside it)")
            continue
        try:
            if entry.existed:
                os.replace(entry.orig, entry.target)
            else:
                os.unlink(entry.target)
            put_back += 1
        except OSError as error:
            kept = f"; original kept in {entry.orig}" if entry.existed else ""
            failed.append(f"{entry.target} ({error.strerror or error}{kept})")
    return put_back, failed, changed, lost


def write_files(files: list[SourceFile], read_as: list[bytes | None] | None = None, *, tree: Path) -> None:
    """Replace every file of `files` (inside `tree`) by its `encoded()` content, in the given order, all or nothing.

    `read_as`, when given, holds for each file the bytes it was read with (None for a file that did not exist): a file
    that no longer holds them, checked again right before it is replaced, stops the write with nothing written. A file
    that is a symbolic link to a file outside `tree` is refused before anything is written, and so is a tree whose
    journal exists (another write runs, or one was interrupted: `recover` it first).

    Raises `SourceError` when a file cannot be written or has changed since it was read; its message says whether
    anything was left written (only when putting back a replaced file failed too; the journal then stays, for
    `recover` to try again). Raises `Interrupted` for SIGINT, SIGTERM or SIGHUP, after rolling back (or, for a signal
    that came after the last replacement, after finishing).
    """
    tree = _target(tree)
    targets = [_target(file.path) for file in files]
    read_as = read_as if read_as is not None else [_UNCHECKED] * len(files)
    for file, target in zip(files, targets):
        if not target.is_relative_to(tree):
            raise SourceError(f"cannot write {file.path}: it links to {target}, outside {tree}; nothing was written")
    for target in targets:
        _check_writable(target)
    _check_writable(tree / JOURNAL)
    transaction = secrets.token_hex(TRANSACTION_ID_BYTES)
    planned = [
        (target.relative_to(tree), target.exists(), hashlib.sha256(file.encoded()).hexdigest())
        for file, target in zip(files, targets)
    ]
    entries = _entries(tree, transaction, planned)
    with _locked(tree), _Signals() as signals:
        signals.holding = True  # the journal is created whole, or not at all
        try:
            _write_journal(tree, transaction, "staging", entries, create=True)
        except FileExistsError as error:
            raise SourceError(
                f"cannot write {tree}: {tree / JOURNAL} exists (a write was interrupted; the next `tileblend rewrite` "
                "rolls it back); nothing was written"
            ) from error
        except OSError as error:
            raise SourceError(f"cannot write {tree / JOURNAL}: {error}; nothing was written") from error
        replacing, current = False, tree / JOURNAL
        try:
            signals.holding = False
            if signals.received is not None:  # it came while the journal was written
                raise Interrupted(signals.received, written=False)
            for file, entry in zip(files, entries):
                current = entry.target
                like = entry.target.stat() if entry.existed else None
                _stage(entry.new, file.encoded(), like)
                if like is not None:
                    _stage(entry.orig, entry.target.read_bytes(), like)
            current = tree / JOURNAL
            _write_journal(tree, transaction, "replacing", entries)
            replacing = True
            for entry, original in zip(entries, read_as):
                current = entry.target
                if original is not _UNCHECKED:
                    _check_unchanged(entry.target, original)
                os.replace(entry.new, entry.target)
            signals.holding = True  # from here on the write completes
            current = tree / JOURNAL
            _write_journal(tree, transaction, "committed", entries)
        except BaseException as error:
            signals.holding = True  # a roll-back in progress finishes
            put_back, failed, _, _ = _roll_back(entries, replacing)
            if failed:
                raise SourceError(f"cannot write {current}: {error}; left written: {', '.join(failed)}") from error
            _remove([tree / JOURNAL, tree / f"{JOURNAL}.tmp"])
            if not isinstance(error, Exception):
                raise
            done = f" (files replaced before it, put back: {put_back})" if replacing else ""
            raise SourceError(f"cannot write {current}: {error}; nothing was written{done}") from error
        _remove([entry.orig for entry in entries] + [tree / JOURNAL])


def recover(tree: Path) -> str | None:
    """Finish the transaction an earlier write of `tree` left (it was killed): roll it back if it had not committed,
    else remove what it left. A file changed after that write is left as it is, its original kept beside it. Return
    one line saying what was found and done, or None when there was nothing.

    The journal comes from the tree, so it is checked before anything is touched (`_read_journal`): one that is not
    a regular file, or fails a check, raises `JournalRefused` and stays, with every file as it is.

    Raises `SourceError` when a write is running there or a file cannot be put back (the journal stays, for the next
    try), and after putting back every file it could when an original is missing (deleted after the kill: nothing
    can put that file back; the journal is removed, so later writes run)."""
    tree = _target(tree)
    journal = tree / JOURNAL
    if not has_journal(tree):
        return None
    with _locked(tree):
        phase, entries = _read_journal(tree)
        _remove([tree / f"{JOURNAL}.tmp"])
        if phase == "committed":
            removed = _remove(path for entry in entries for path in (entry.orig, entry.new))
            journal.unlink()
            return (
                f"found {journal} of a write that finished: removed its {removed} leftover backups; the files stay "
                "written"
            )
        put_back, failed, changed, lost = _roll_back(entries, replacing=phase == "replacing")
        if failed:
            raise SourceError(
                f"cannot roll back the interrupted write of {journal}: cannot put back {', '.join(failed)}"
            )
        journal.unlink()
    kept = f"; changed since, left as they are: {', '.join(changed)}" if changed else ""
    if lost:
        raise SourceError(
            f"found {journal} of an interrupted write: rolled back ({put_back} files put back){kept}; cannot put "
            f"back {', '.join(lost)}: its original was deleted after the write was killed, so it keeps the "
            "interrupted write's content. Restore it yourself (`git checkout -- FILE` in a checkout) or keep it; "
            "the journal is removed"
        )
    return f"found {journal} of an interrupted write: rolled back ({put_back} files put back){kept or '; the tree is as before it'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Roll back a write of tileblend that was killed.")
    parser.add_argument("path", type=Path, help="a diffusers checkout (with src/diffusers/) or package directory")
    args = parser.parse_args(argv)
    located = find_package(args.path)
    if located is None:
        print(f"{args.path} is not a diffusers checkout or package directory", file=sys.stderr)
        return 2
    try:
        found = recover(transaction_root(located[0]))
    except (SourceError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if found:
        print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
