"""The command-line options the end-to-end benchmarks share, and the worker config they make."""

import argparse

import torch

from .. import arguments


DEFAULT_DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
MODEL_DTYPES = ("float32", "float16", "bfloat16")
"""The dtypes the end-to-end benchmarks run models in (names of `tileblend.blend.DTYPES`)."""
RUN_CONFIG_KEYS = ("device", "dtype", "seed", "threads", "warmup", "reps")
"""The options every benchmark passes to its workers in their config (`run_config`)."""


def parse_size(text: str) -> tuple[int, int]:
    """An argparse type: `--size 1024` (square) or `--size 720x1280` (height x width), positive pixels."""
    try:
        size = tuple(int(part) for part in text.lower().split("x"))
    except ValueError:
        size = ()
    if len(size) == 1:
        size *= 2
    if len(size) != 2 or min(size) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive SIZE or HEIGHTxWIDTH in pixels")
    return size


def add_benchmark_parser(subparsers, name: str, help: str, description: str, handler) -> argparse.ArgumentParser:
    """The `tileblend bench NAME` parser: `description` (the benchmark's module docstring) shown as written, and
    `handler(args)` as what runs it."""
    parser = subparsers.add_parser(
        name, help=help, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.set_defaults(handler=handler)
    return parser


INTEGER_TYPES = {"--warmup": arguments.non_negative_int, "--seed": int}
"""The integer run options that take other values than positive integers (every other one must be at least 1)."""


def add_run_options(parser: argparse.ArgumentParser, device_help: str, integer_options) -> None:
    """`--device` (default: CUDA if available; one this machine has) with `device_help`, `--dtype` (one of
    `MODEL_DTYPES`), then one integer option per row of `integer_options`: (flag, default, help), positive unless
    `INTEGER_TYPES` says otherwise."""
    parser.add_argument("--device", type=arguments.device, default=DEFAULT_DEVICE, help=device_help)
    parser.add_argument("--dtype", choices=MODEL_DTYPES, default="float32", help="model and input dtype")
    for flag, default, help in integer_options:
        parser.add_argument(flag, type=INTEGER_TYPES.get(flag, arguments.positive_int), default=default, help=help)


def run_config(args: argparse.Namespace) -> dict:
    """The options of `RUN_CONFIG_KEYS` from `args`, for a worker config."""
    return {name: getattr(args, name) for name in RUN_CONFIG_KEYS}
