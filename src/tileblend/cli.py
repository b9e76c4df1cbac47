"""The `tileblend` command: `run`, `verify`, `bench` and `rewrite` subcommands, one module each."""

import argparse
import sys

from . import __version__, run
from .bench import cli as bench
from .output import OutputError
from .upstream import rewrite
from .verify import cli as verify


SUBCOMMANDS = (run, verify, bench, rewrite)


def build_parser() -> argparse.ArgumentParser:
    """The `tileblend` parser with every subcommand; a parsed namespace's `handler(args)` runs it."""
    parser = argparse.ArgumentParser(
        prog="tileblend", description="Exact, vectorized tiled-VAE blending for diffusers."
    )
    parser.add_argument("--version", action="version", version=f"tileblend {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for subcommand in SUBCOMMANDS:
        subcommand.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse `argv` (default: sys.argv[1:]), run the subcommand and return its exit code (2 on a usage error or an
    output file it could not write, 130 on Ctrl-C: one line, no traceback)."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except OutputError as error:
        print(f"tileblend {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"tileblend {args.command}: interrupted", file=sys.stderr)
        return 130
