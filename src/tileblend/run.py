"""`tileblend run SCRIPT [ARGS...]`: run an unchanged Python script with tileblend enabled, like `coverage run`."""

import argparse
import os
import runpy
import sys

from .patch import enable


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a Python script with the vectorized blends enabled",
        description="Run SCRIPT as __main__ with the same argv it would get from `python SCRIPT ARGS...`, with every "
        "diffusers loop blend replaced by the vectorized one.",
    )
    parser.add_argument("script", help="path of the Python script to run")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Run `args.script` as `__main__`; returns its exit code (0 if it ends normally, 2 if it cannot be opened).

    As under `python SCRIPT`, `sys.argv` is `[SCRIPT, *ARGS]` and the script's directory comes first on `sys.path`
    (in place of this command's own entry), so the script imports its neighbours.
    """
    if not os.path.isfile(args.script):
        print(f"tileblend run: can't open file {args.script!r}: no such file", file=sys.stderr)
        return 2
    enable()
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [args.script, *args.script_args]
    sys.path[0] = os.path.dirname(os.path.realpath(args.script))
    try:
        runpy.run_path(args.script, run_name="__main__")
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            return exit.code or 0
        print(exit.code, file=sys.stderr)
        return 1
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path
    return 0
