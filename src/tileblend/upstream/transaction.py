"""Replace files of a diffusers tree all or nothing, also when the process is stopped or killed.

`write_files` is how `tileblend rewrite` and the copy checker write. One write is a transaction with a random id:

1. The journal, `.tileblend-transaction.json` at the top of the tree, is created (exclusively: a second writer is
   refused) listing the files, relative to the tree, and whether each existed; its phase is "staging".
2. Next to each file, `.NAME.tileblend-ID.new` gets the new bytes (with the file's mode and owner, through symbolic
   links to the file they point to) and `.NAME.tileblend-ID.orig` a copy of the current ones.
3. The phase becomes "replacing" (each journal update is written aside and renamed over it, so it is always whole).
   Each file is checked to still hold the bytes it was read with (an edit made meanwhile is never lost) and replaced
   by its `.new` file, in the given order.
4. The phase becomes "committed"; the `.orig` files and the journal are removed.

Rolling back reads the state from the files, not from memory: a file whose `.new` is still there was not replaced;
one whose `.new` is gone is put back from its `.orig` (or removed, if it was new). During steps 1-3 an error, or
SIGINT, SIGTERM or SIGHUP (raised as `Interrupted`), rolls back, removes every temporary file and the journal, and
propagates; a signal after step 3 waits until step 4 is done. After a death nothing can catch (SIGKILL, an
out-of-memory kill), `recover`, which every command that writes a tree runs first, finds the journal and finishes the
transaction the same way: rolled back before "committed", cleaned up after it.

    python -m tileblend.upstream.transaction PATH

runs `recover` on a diffusers checkout or package directory (`make fix-copies` does, before a checkout's own checker).
"""

import argparse
import array
import contextlib
import hashlib
import json
import os
import secrets
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from .source_files import SourceError, SourceFile, find_package


JOURNAL = ".tileblend-transaction.json"
JOURNAL_FORMAT = "tileblend transaction 2"
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


def _write_journal(tree: Path, transaction: str, phase: str, entries: list[_Entry], create: bool = False) -> None:
    """Write the journal whole: created exclusively, or written aside and renamed over the old one."""
    files = [[entry.target.relative_to(tree).as_posix(), entry.existed, entry.digest] for entry in entries]
    data = json.dumps({"format": JOURNAL_FORMAT, "id": transaction, "phase": phase, "files": files}).encode()
    path = tree / JOURNAL if create else tree / f"{JOURNAL}.tmp"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_EXCL if create else os.O_TRUNC), 0o644)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    if not create:
        os.replace(path, tree / JOURNAL)


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


def _roll_back(entries: list[_Entry], replacing: bool) -> tuple[int, list[str], list[str]]:
    """Undo a transaction from what the files show: (files put back, the targets that could not be, the targets left
    as they are because they changed after the write: their originals stay in their `.orig` files)."""
    put_back, failed, changed = 0, [], []
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
        try:
            if entry.existed:
                os.replace(entry.orig, entry.target)
            else:
                os.unlink(entry.target)
            put_back += 1
        except OSError:
            failed.append(f"{entry.target} (original kept in {entry.orig})" if entry.existed else str(entry.target))
    return put_back, failed, changed


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
    transaction = secrets.token_hex(4)
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
            put_back, failed, _ = _roll_back(entries, replacing)
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

    Raises `SourceError` when a write is running there, or a file cannot be put back (the journal stays, for the next
    try)."""
    tree = _target(tree)
    journal = tree / JOURNAL
    if not journal.exists():
        return None
    with _locked(tree):
        _remove([tree / f"{JOURNAL}.tmp"])
        try:
            state = json.loads(journal.read_bytes())
            assert state["format"] == JOURNAL_FORMAT
            phase, entries = state["phase"], _entries(tree, state["id"], state["files"])
        except (ValueError, KeyError, TypeError, AssertionError):  # cut short while it was created: nothing staged
            journal.unlink()
            return f"removed {journal}, the journal of a write stopped before it staged anything"
        if phase == "committed":
            removed = _remove(path for entry in entries for path in (entry.orig, entry.new))
            journal.unlink()
            return (
                f"found {journal} of a write that finished: removed its {removed} leftover backups; the files stay "
                "written"
            )
        put_back, failed, changed = _roll_back(entries, replacing=phase == "replacing")
        if failed:
            raise SourceError(
                f"cannot roll back the interrupted write of {journal}: cannot put back {', '.join(failed)}"
            )
        journal.unlink()
    kept = f"; changed since, left as they are: {', '.join(changed)}" if changed else "; the tree is as before it"
    return f"found {journal} of an interrupted write: rolled back ({put_back} files put back){kept}"


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
