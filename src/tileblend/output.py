"""Writing a command's output file once its work is done.

The path was checked before the work (`tileblend.arguments.output_file`), yet a write can still fail (a full disk, a
folder made read-only meanwhile, /dev/full): `writing` turns that into an `OutputError` naming the file and the error,
which `tileblend.cli.main` prints as one line, exit 2. What the command printed before stays printed.
"""

import contextlib
from collections.abc import Iterator
from pathlib import Path


class OutputError(Exception):
    """An output file that could not be written: "cannot write PATH: REASON"."""


@contextlib.contextmanager
def writing(path: Path | str) -> Iterator[Path]:
    """A block that writes the file `path` (yielded as a `Path`), its missing folders created first; an `OSError`
    in it is raised as an `OutputError` naming `path`."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        yield Path(path)
    except OSError as error:
        raise OutputError(f"cannot write {path}: {error.strerror or error}") from error
