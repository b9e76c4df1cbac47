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
import os
import secrets
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .journal import (
    JOURNAL,
    JOURNAL_ASIDE,
    TRANSACTION_ID_BYTES,
    Entry,
    entries,
    has_journal,
    read_journal,
    write_journal,
)
from .source_files import SourceError, SourceFile, find_package


NEW_FILE_MODE = 0o644
FS_IOC_GETFLAGS = 0x80086601
"""Linux's ioctl that reads an inode's attribute flags (what `lsattr` prints)."""
FS_APPEND_FL = 0x20
"""The append-only flag (`chattr +a`): a file can only grow, a directory's entries can be neither renamed nor removed
(an immutable one, `chattr +i`, is refused as read-only)."""
CAUGHT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
_UNCHECKED = object()
"""The `read_as` entry of a file written without checking what it holds."""
NOTHING_WRITTEN = "nothing was written"
DIGEST_CHUNK_BYTES = 1 << 20


class Interrupted(KeyboardInterrupt):
    """A signal that stopped a write or a recovery; `outcome` says what was left: "nothing was written" (rolled back),
    "every file was written" (it came after the last replacement), or what a recovery did before it stopped."""

    def __init__(self, signum: int, outcome: str):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.outcome = outcome

    def describe(self) -> str:
        return f"interrupted by {signal.Signals(self.signum).name}; {self.outcome}"


def interruption(interrupt: KeyboardInterrupt) -> tuple[str, int]:
    """What a command that writes says and returns when `interrupt` stopped it: an `Interrupted` from inside a write
    (which says what was written), or a Ctrl-C before any write; the exit code is 128 + the signal's number."""
    if isinstance(interrupt, Interrupted):
        return interrupt.describe(), 128 + interrupt.signum
    return "interrupted; nothing was written", 128 + signal.SIGINT


class _Signals:
    """While active (in the main thread), the first of `CAUGHT_SIGNALS` that the process handles raises `Interrupted`
    (nothing written), unless `holding` is set: then it is kept in `received`, and raised with `outcome` when the
    block ends without an error. Signals after the first are ignored: a roll-back in progress finishes."""

    def __init__(self):
        self.holding = False
        self.received = None
        self.outcome = NOTHING_WRITTEN
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
                raise Interrupted(signum, NOTHING_WRITTEN)

    def __exit__(self, error_type, error, traceback):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        if error_type is None and self.received is not None:
            raise Interrupted(self.received, self.outcome)
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


def _holds_new(entry: Entry) -> bool:
    """Whether the entry's file holds the content the write wrote (read in chunks: it may be any size by now)."""
    digest = hashlib.sha256()
    try:
        with open(entry.target, "rb") as file:
            while chunk := file.read(DIGEST_CHUNK_BYTES):
                digest.update(chunk)
    except FileNotFoundError:
        return False
    return digest.hexdigest() == entry.digest


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
        file.flush()
        os.fsync(file.fileno())  # on disk before a journal that says "replacing" counts on it
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


@dataclass
class _RollBack:
    """What a roll-back did: files put back; files it could not put back (the journal stays, for another try); files
    changed after the write, left as they are (an original stays in its `.orig` file); files holding the write's
    content whose original is gone (nothing can put them back)."""

    put_back: int = 0
    failed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """One line: the files put back and every file that is not as before the write."""
        line = f"rolled back ({self.put_back} files put back)"
        if self.changed:
            line += f"; changed since, left as they are: {', '.join(self.changed)}"
        if self.lost:
            line += (
                f"; cannot put back {', '.join(self.lost)}: its original was deleted after the write was killed, so "
                "it keeps the interrupted write's content. Restore it yourself (`git checkout -- FILE` in a "
                "checkout) or keep it"
            )
        return line if self.changed or self.lost else f"{line}; the tree is as before it"


def _roll_back(written: list[Entry], replacing: bool) -> _RollBack:
    """Undo a transaction from what the files show (`_RollBack`)."""
    done = _RollBack()
    for entry in written:
        if not replacing or entry.new.exists():  # not replaced
            _remove([entry.new, entry.orig])
            continue
        if not entry.target.exists() and not entry.orig.exists():
            continue  # a new file never written, or one already put back by a roll-back that was stopped
        if not _holds_new(entry):
            if entry.orig.exists():
                done.changed.append(f"{entry.target} (its original is in {entry.orig})")
            elif not entry.existed:
                done.changed.append(f"{entry.target} (made by the interrupted write)")
            # else it was put back already, by a roll-back that was stopped
            continue
        if entry.existed and not entry.orig.exists():
            done.lost.append(f"{entry.target} (no {entry.orig.name} beside it)")
            continue
        try:
            if entry.existed:
                os.replace(entry.orig, entry.target)
            else:
                os.unlink(entry.target)
            done.put_back += 1
        except OSError as error:
            kept = f"; original kept in {entry.orig}" if entry.existed else ""
            done.failed.append(f"{entry.target} ({error.strerror or error}{kept})")
    return done


def _sync_directories(written: list[Entry]) -> None:
    """Flush the directories of the staged files (POSIX), so that a journal saying "replacing" never outlives them."""
    if os.name != "posix":
        return
    for directory in sorted({entry.target.parent for entry in written}):
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def write_files(files: list[SourceFile], read_as: list[bytes | None] | None = None, *, tree: Path) -> None:
    """Replace every file of `files` (inside `tree`) by its `encoded()` content, in the given order, all or nothing.

    `read_as`, when given, holds for each file the bytes it was read with (None for a file that did not exist): a file
    that no longer holds them, checked again right before it is replaced, stops the write with nothing written. A file
    that is a symbolic link to a file outside `tree` is refused before anything is written, and so is a tree whose
    journal exists (another write runs, or one was interrupted: `recover` it first).

    Raises `SourceError` when a file cannot be written or has changed since it was read; its message says whether
    anything was left written (only when putting back a replaced file failed too; the journal then stays, for
    `recover` to try again) and names a file changed meanwhile. Raises `Interrupted` for SIGINT, SIGTERM or SIGHUP,
    after rolling back (or, for a signal that came after the last replacement, after finishing).
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
    written = entries(tree, transaction, planned)
    with _locked(tree), _Signals() as signals:
        if has_journal(tree):
            raise SourceError(
                f"cannot write {tree}: {tree / JOURNAL} exists (a write was interrupted; the next `tileblend rewrite` "
                "rolls it back); nothing was written"
            )
        signals.holding = True  # the journal is created whole, or not at all
        try:
            write_journal(tree, transaction, "staging", written)
        except OSError as error:
            _remove([tree / JOURNAL_ASIDE])
            raise SourceError(f"cannot write {tree / JOURNAL}: {error}; nothing was written") from error
        replacing, current = False, tree / JOURNAL
        try:
            signals.holding = False
            if signals.received is not None:  # it came while the journal was written
                raise Interrupted(signals.received, NOTHING_WRITTEN)
            for file, entry in zip(files, written):
                current = entry.target
                like = entry.target.stat() if entry.existed else None
                _stage(entry.new, file.encoded(), like)
                if like is not None:
                    _stage(entry.orig, entry.target.read_bytes(), like)
            _sync_directories(written)
            current = tree / JOURNAL
            write_journal(tree, transaction, "replacing", written)
            replacing = True
            for entry, original in zip(written, read_as):
                current = entry.target
                if original is not _UNCHECKED:
                    _check_unchanged(entry.target, original)
                os.replace(entry.new, entry.target)
            signals.holding, signals.outcome = True, "every file was written"  # from here on the write completes
            current = tree / JOURNAL
            write_journal(tree, transaction, "committed", written)
        except BaseException as error:
            signals.holding = True  # a roll-back in progress finishes
            done = _roll_back(written, replacing)
            if done.failed:
                raise SourceError(
                    f"cannot write {current}: {error}; left written: {', '.join(done.failed)}"
                ) from error
            _remove([tree / JOURNAL, tree / JOURNAL_ASIDE])
            outcome = NOTHING_WRITTEN + (
                f"; changed meanwhile, left as they are: {', '.join(done.changed)}" if done.changed else ""
            )
            if isinstance(error, Interrupted):
                error.outcome = outcome
            if not isinstance(error, Exception):
                raise
            put_back = f" (files replaced before it, put back: {done.put_back})" if replacing else ""
            raise SourceError(f"cannot write {current}: {error}; {outcome}{put_back}") from error
        _remove([entry.orig for entry in written] + [tree / JOURNAL])


def recover(tree: Path) -> str | None:
    """Finish the transaction an earlier write of `tree` left (it was killed): roll it back if it had not committed,
    else remove what it left. A file changed after that write is left as it is, its original kept beside it. Return
    one line saying what was found and done, or None when there was nothing. SIGINT, SIGTERM and SIGHUP wait until
    it is done, then raise `Interrupted`, which says what it did.

    The journal comes from the tree, so `tileblend.upstream.journal.read_journal` checks it before anything is
    touched: one it refuses raises `JournalRefused` and stays, every file as it is.

    Raises `SourceError` when a write is running there, or a file cannot be put back (the journal stays, for the next
    try), and, after putting back every file it could, when an original is missing (deleted after the kill: nothing
    can put that file back; the journal is removed, so later writes run)."""
    tree = _target(tree)
    journal = tree / JOURNAL
    if not has_journal(tree) and not os.path.lexists(tree / JOURNAL_ASIDE):
        return None
    with _locked(tree), _Signals() as signals:
        signals.holding = True
        if not has_journal(tree):  # killed while the journal was written aside, before anything was staged
            if not _remove([tree / JOURNAL_ASIDE]):
                return None
            found = f"removed {tree / JOURNAL_ASIDE}, left by a write killed before it began"
        else:
            phase, written = read_journal(tree)
            _remove([tree / JOURNAL_ASIDE])
            if phase == "committed":
                removed = _remove(path for entry in written for path in (entry.orig, entry.new))
                journal.unlink()
                found = (
                    f"found {journal} of a write that finished: removed its {removed} leftover backups; the files "
                    "stay written"
                )
            else:
                done = _roll_back(written, replacing=phase == "replacing")
                if done.failed:
                    raise SourceError(
                        f"cannot roll back the interrupted write of {journal}: cannot put back {', '.join(done.failed)}"
                    )
                journal.unlink()
                found = f"found {journal} of an interrupted write: {done.describe()}"
                if done.lost:
                    raise SourceError(f"{found}; the journal is removed")
        signals.outcome = f"{found}; nothing else was written"
    return found


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
