"""Argument types shared by the `tileblend` subcommands, so that a user error (a device this machine lacks, a
non-positive count) is one usage error, exit 2, before any work: exit 1 keeps its meaning of a real mismatch."""

import argparse
import importlib.util
import os
from pathlib import Path

import torch


def device(text: str) -> str:
    """A torch device this machine has, holding real values: not `meta`, and `cuda`/`mps`/`xpu`... only when torch
    sees one."""
    try:
        parsed = torch.device(text)
    except RuntimeError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a torch device ({error})") from error
    if parsed.type == "meta":
        raise argparse.ArgumentTypeError("the meta device holds no values to compare or time: use cpu or cuda")
    if parsed.type != "cpu":
        backend = getattr(torch, parsed.type, None)
        count = backend.device_count() if backend is not None and backend.is_available() else 0
        if count <= (parsed.index or 0):
            raise argparse.ArgumentTypeError(f"torch {torch.__version__} sees no {text} device on this machine")
    return text


def positive_int(text: str) -> int:
    """An integer of at least 1."""
    return _bounded_int(text, 1)


def non_negative_int(text: str) -> int:
    """An integer of at least 0."""
    return _bounded_int(text, 0)


def at_least_two(text: str) -> int:
    """An integer of at least 2 (the processes of a parallel run)."""
    return _bounded_int(text, 2)


def _bounded_int(text: str, lowest: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = lowest - 1
    if value < lowest:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer of at least {lowest}")
    return value


def output_file(text: str) -> str:
    """A file path the command can write when its work is done: not a folder, and checked by trying, since a
    permission check proves little (root passes it, also for /proc or a read-only mount). An existing file is opened
    for appending, nothing written; a new one is created and removed; under folders still missing, the first of them is
    created and removed (they are created when the output is written)."""
    path = Path(text).absolute()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text}: {folder} is not a folder this user can write into")
    try:
        if path.exists():  # O_NONBLOCK: a FIFO without a reader is refused instead of waiting for one
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))
        elif folder == path.parent:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
            path.unlink()
        else:
            first_missing = folder / path.relative_to(folder).parts[0]
            first_missing.mkdir()
            first_missing.rmdir()
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {error.strerror or error}") from error
    return text


def plot_file(text: str) -> str:
    """An `output_file` for a PNG, with matplotlib installed to draw it."""
    if importlib.util.find_spec("matplotlib") is None:
        raise argparse.ArgumentTypeError("needs matplotlib: pip install 'tileblend[bench]'")
    return output_file(text)
