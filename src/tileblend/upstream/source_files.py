"""Read and write the Python files of a diffusers tree byte for byte as they are stored.

Every file that `tileblend rewrite` and `utils/check_copies.py` read goes through here, so that a checkout
made on Windows (CRLF line endings, files that start with a UTF-8 byte-order mark) comes back unchanged outside the
lines that were edited:

- `read_source` decodes with the encoding Python itself uses for source (`tokenize.detect_encoding`: UTF-8,
  `utf-8-sig` for a file that starts with a BOM, or the file's coding cookie) and keeps every line ending in the text.
  `split_lines` splits it where Python does (`\\r\\n`, `\\n`, `\\r`).
- Edits replace whole lines. Lines an edit adds are generated with `\\n` and take the file's dominant line ending
  through `with_newline`; text is compared regardless of line endings through `normalize_newlines`.
- Writing them back, all or nothing, is `tileblend.upstream.transaction.write_files`; `one_name_per_file` refuses
  first a file that the tree holds under two names.
"""

import io
import os
import re
import stat
import tokenize
from dataclasses import dataclass
from pathlib import Path


MAX_SOURCE_BYTES = 16 << 20
"""Far above any Python module of diffusers (its largest in 0.42.1, `loaders/lora_pipeline.py`, is 0.3 MiB)."""
COPIED_FROM = re.compile(r"^(\s*)#\s*Copied from\s+diffusers\.(\S+\.\S+)\s*($|\S.*$)")


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


def one_name_per_file(paths: list[Path]) -> None:
    """Raise `SourceError` where two of `paths` are one file, told by its device and inode (a symbolic link in the
    tree to another of its files, two links to one file, or a hard link): a write would replace it twice. A path that
    does not exist yet (a file to create) is told by its resolved path."""
    names = {}
    for path in paths:
        try:
            status = path.stat()
            key = (status.st_dev, status.st_ino)
        except FileNotFoundError:
            key = path.resolve()
        if key in names:
            raise SourceError(
                f"{names[key]} and {path} are the same file (a symbolic or hard link, two names of one file): it "
                "would be written twice; remove the link; nothing was written"
            )
        names[key] = path


def _read_regular_file(path: Path) -> bytes:
    """The bytes of `path`, a regular file (or a link to one) of at most `MAX_SOURCE_BYTES`: a tree can hold a FIFO,
    which would block a read, or a link to a device, which never ends; both raise `OSError`."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # not on Windows, which has no FIFO files
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise OSError(f"{path} is not a regular file")
    with os.fdopen(descriptor, "rb") as file:
        data = file.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise OSError(f"{path} is larger than {MAX_SOURCE_BYTES} bytes, more than any Python module of diffusers")
    return data


def read_source(path: Path) -> SourceFile:
    """Read `path` as Python reads source; raise `SourceError` when it cannot be read or decoded, or is not a regular
    file of at most `MAX_SOURCE_BYTES`."""
    try:
        data = _read_regular_file(path)
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (OSError, SyntaxError, UnicodeDecodeError, LookupError) as error:
        raise SourceError(f"cannot read {path}: {error}; nothing was written") from error
    return SourceFile(path=path, text=text, encoding=encoding, newline=dominant_newline(text))
