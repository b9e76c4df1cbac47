"""Read and write the Python files of a diffusers tree byte for byte as they are stored.

Every file that `tileblend rewrite` and `utils/check_copies.py` read or write goes through here, so that a checkout
made on Windows (CRLF line endings, files that start with a UTF-8 byte-order mark) comes back unchanged outside the
lines that were edited:

- `read_source` decodes with the encoding Python itself uses for source (`tokenize.detect_encoding`: UTF-8,
  `utf-8-sig` for a file that starts with a BOM, or the file's coding cookie) and keeps every line ending in the text.
  `split_lines` splits it where Python does (`\\r\\n`, `\\n`, `\\r`).
- Edits replace whole lines. Lines an edit adds are generated with `\\n` and take the file's dominant line ending
  through `with_newline`; text is compared regardless of line endings through `normalize_newlines`.
- `write_files` replaces a set of files all or nothing: each new content is staged in a temporary file next to its
  target (with the target's mode and owner, through symbolic links to the file they point to), together with a
  backup of the target; only then are the targets replaced, in the given order, and if one replacement fails the
  ones before it are put back from their backups. Given the bytes each file had when it was read, it also refuses,
  before replacing it, a file that has changed since (an edit made while the rewrite ran is never lost).
"""

import array
import io
import os
import re
import sys
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path


COPIED_FROM = re.compile(r"^(\s*)#\s*Copied from\s+diffusers\.(\S+\.\S+)\s*($|\S.*$)")
NEW_FILE_MODE = 0o644
FS_IOC_GETFLAGS = 0x80086601
"""Linux's ioctl that reads an inode's attribute flags (what `lsattr` prints)."""
FS_APPEND_FL = 0x20
"""The append-only flag (`chattr +a`): a file can only grow, a directory's entries can be neither renamed nor removed
(an immutable one, `chattr +i`, is refused as read-only)."""
_UNCHECKED = object()
"""The `read_as` entry of a file written without checking what it holds."""


class SourceError(Exception):
    """A source file or tree that cannot be read or written as asked; the message says what was written."""


@dataclass(frozen=True)
class SourceFile:
    """A Python file's text (line endings as stored), its encoding (`utf-8-sig` when it has a BOM) and its
    dominant line ending."""

    path: Path
    text: str
    encoding: str = "utf-8"
    newline: str = "\n"

    def encoded(self) -> bytes:
        return self.text.encode(self.encoding)


def find_package(path: Path) -> tuple[Path, Path | None] | None:
    """(the `diffusers` package directory, the checkout root or None) for a checkout (`path/src/diffusers`) or a
    package directory named `diffusers`; None for any other directory."""
    for package, root in ((path / "src" / "diffusers", path), (path, None)):
        if package.name == "diffusers" and (package / "__init__.py").is_file():
            return package, root
    return None


def split_lines(text: str) -> list[str]:
    """The lines of `text` with their endings, split where Python's tokenizer splits them (not at form feeds)."""
    return io.StringIO(text, newline="").readlines()


def dominant_newline(text: str) -> str:
    """The most frequent line ending of `text`: "\\r\\n", "\\r" or "\\n" (also for a tie or no line ending)."""
    crlf = text.count("\r\n")
    counts = {"\n": text.count("\n") - crlf, "\r\n": crlf, "\r": text.count("\r") - crlf}
    return max(counts, key=lambda newline: (counts[newline], newline == "\n"))


def with_newline(text: str, newline: str) -> str:
    """Generated text (lines ending in "\\n") with `newline` as its line ending."""
    return text if newline == "\n" else text.replace("\n", newline)


def normalize_newlines(text: str) -> str:
    """`text` with every line ending written "\\n", for comparisons that ignore line endings."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_source(path: Path) -> SourceFile:
    """Read `path` as Python reads source; raise `SourceError` when it cannot be read or decoded."""
    try:
        data = path.read_bytes()
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (OSError, SyntaxError, UnicodeDecodeError, LookupError) as error:
        raise SourceError(f"cannot read {path}: {error}") from error
    return SourceFile(path=path, text=text, encoding=encoding, newline=dominant_newline(text))


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


def _stage(target: Path, data: bytes, like: os.stat_result | None) -> Path:
    """A temporary file next to `target` holding `data`, with the mode and owner of `like` (a new file's mode when
    None)."""
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        # Owners exist on POSIX only; replacing a file would give it to the running user.
        if os.name == "posix" and like is not None and (like.st_uid, like.st_gid) != (os.getuid(), os.getgid()):
            try:
                os.chown(temporary, like.st_uid, like.st_gid)
            except PermissionError as error:
                raise PermissionError(f"cannot keep its owner (uid {like.st_uid}, gid {like.st_gid})") from error
        os.chmod(temporary, like.st_mode & 0o7777 if like is not None else NEW_FILE_MODE)
    except BaseException:
        os.unlink(temporary)
        raise
    return Path(temporary)


def _remove(paths) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass


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


def write_files(
    files: list[SourceFile], read_as: list[bytes | None] | None = None, inside: Path | None = None
) -> None:
    """Replace every file of `files` by its `encoded()` content, in the given order, all or nothing.

    `read_as`, when given, holds for each file the bytes it was read with (None for a file that did not exist): a file
    that no longer holds them, checked again right before it is replaced, stops the write with nothing written.
    `inside`, when given, is the tree the user named: a file that is a symbolic link to a file outside it is refused
    before anything is written.

    Raises `SourceError` when a file cannot be written or has changed since it was read; its message says whether
    anything was left written (only when putting back a replaced file failed too). A KeyboardInterrupt during the
    replacements is re-raised after the files replaced so far are put back.
    """
    targets = [_target(file.path) for file in files]
    read_as = read_as if read_as is not None else [_UNCHECKED] * len(files)
    for file, target in zip(files, targets):
        if inside is not None and not target.is_relative_to(_target(inside)):
            raise SourceError(f"cannot write {file.path}: it links to {target}, outside {inside}; nothing was written")
    for target in targets:
        _check_writable(target)
    staged, backups = [], []
    try:
        for file, target in zip(files, targets):
            like = target.stat() if target.exists() else None
            staged.append(_stage(target, file.encoded(), like))
            backups.append(_stage(target, target.read_bytes(), like) if like is not None else None)
    except BaseException as error:
        _remove(staged + [backup for backup in backups if backup is not None])
        if not isinstance(error, OSError):
            raise
        raise SourceError(f"cannot write {target}: {error}; nothing was written") from error
    done = 0
    try:
        for temporary, target, original in zip(staged, targets, read_as):
            if original is not _UNCHECKED:
                _check_unchanged(target, original)
            os.replace(temporary, target)
            done += 1
    except BaseException as error:
        not_restored = _restore(targets[:done], backups[:done])
        _remove(staged[done:] + [backup for backup in backups[done:] if backup is not None])
        if not isinstance(error, Exception) and not not_restored:
            raise
        state = (
            "left written: " + ", ".join(not_restored)
            if not_restored
            else f"nothing was written (files replaced before it, put back: {done})"
        )
        raise SourceError(f"cannot write {targets[done]}: {error}; {state}") from error
    _remove(backup for backup in backups if backup is not None)


def _restore(targets: list[Path], backups: list[Path | None]) -> list[str]:
    """Put each target back from its backup (remove it if it was new); describe the targets that could not be."""
    failed = []
    for target, backup in zip(targets, backups):
        try:
            if backup is None:
                os.unlink(target)
            else:
                os.replace(backup, target)
        except OSError:
            failed.append(f"{target} (new file)" if backup is None else f"{target} (original kept in {backup})")
    return failed
