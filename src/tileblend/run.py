"""`tileblend run SCRIPT [ARGS...]`: run an unchanged Python script with tileblend enabled, like `coverage run`."""

import argparse
import os
import runpy
import sys

from .patch import enable
from .streamed import streamed_classes


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        usage="tileblend run [-h] [--streamed-decode] SCRIPT [ARGS ...]",
        help="run a Python script with the vectorized blends enabled",
        description="Run SCRIPT as __main__ with the same argv it would get from `python SCRIPT ARGS...` (a `--` "
        "among ARGS included), with every diffusers loop blend replaced by the vectorized one.",
    )
    parser.add_argument(
        "--streamed-decode",
        action="store_true",
        help="also stream diffusers' tiled VAE decodes (the same bits, a fraction of the memory; tileblend.streamed)",
    )
    # One REMAINDER for the script and its arguments: argparse drops a `--` that follows a positional of its own.
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, metavar="SCRIPT [ARGS ...]", help="the script and its arguments"
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Run the script of `args.command` as `__main__` (a directory: its `__main__.py`, as `python DIR` does) after one
    line on stderr saying how many blend methods are vectorized; returns its exit code (0 if it ends normally, 2 if it
    cannot be opened or none is given).

    As under `python SCRIPT`, `sys.argv` is `[SCRIPT, *ARGS]` and the script's directory comes first on `sys.path`
    (in place of this command's own entry), so the script imports its neighbours. A `--` before SCRIPT ends
    tileblend's own options and is dropped; every argument after SCRIPT is the script's.
    """
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("tileblend run: error: no script given", file=sys.stderr)
        return 2
    script = command[0]
    if os.path.isdir(script) and not os.path.isfile(os.path.join(script, "__main__.py")):
        print(f"tileblend run: can't find '__main__.py' in the directory {script!r}", file=sys.stderr)
        return 2
    if not os.path.exists(script):
        print(f"tileblend run: can't open file {script!r}: no such file", file=sys.stderr)
        return 2
    patched = enable(streamed_decode=args.streamed_decode)
    streamed = f"tiled decode streamed for {len(streamed_classes())} classes; " if args.streamed_decode else ""
    # One line, so that a user sees the blends are in effect; the script's own output follows untouched.
    print(f"tileblend: {len(patched)} diffusers blend methods vectorized; {streamed}running {script}", file=sys.stderr)
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = list(command)
    # As `python`: a directory (run through its __main__.py) comes first on sys.path itself, a script its directory.
    sys.path[0] = os.path.realpath(script) if os.path.isdir(script) else os.path.dirname(os.path.realpath(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            return exit.code or 0
        print(exit.code, file=sys.stderr)
        return 1
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path
    return 0
