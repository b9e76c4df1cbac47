"""Argument types shared by the `tileblend` subcommands, so that a user error (a device this machine lacks, a
non-positive count) is one usage error, exit 2, before any work: exit 1 keeps its meaning of a real mismatch."""

import argparse

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
