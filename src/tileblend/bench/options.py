"""The command-line options the end-to-end benchmarks share, and the worker config they make."""

import argparse
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from .. import arguments
from .records import RUN_KEYS, WorkerConfig


DEFAULT_DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
MODEL_DTYPES = ("float32", "float16", "bfloat16")
"""The dtypes the end-to-end benchmarks run models in (names of `tileblend.blend.DTYPES`)."""


@dataclass(frozen=True)
class RunOption:
    """An integer option of the end-to-end benchmarks: its flag, argparse type, and the default and help a benchmark
    gets unless it gives its own."""

    flag: str
    type: Callable[[str], int]
    default: int | None
    help: str


RUN_OPTIONS = (
    RunOption("--pairs", arguments.positive_int, 3, "number of A/B process pairs (default: 3)"),
    RunOption("--reps", arguments.positive_int, 5, "timed calls per process (default: 5)"),
    RunOption("--warmup", arguments.non_negative_int, 1, "untimed calls per process before timing (default: 1)"),
    RunOption("--seed", int, 0, "seed of the random weights and inputs"),
    RunOption(
        "--threads",
        arguments.positive_int,
        None,
        "torch CPU threads per worker (default: torch's); 1 on a busy or shared machine",
    ),
)
"""The integer options of the end-to-end benchmarks, in the order `--help` lists them; the defaults and help are those
of the A/B benchmarks (`tileblend bench decode`, `pipeline`)."""


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


def add_run_options(
    parser: argparse.ArgumentParser, device_help: str, *, omit: tuple[str, ...] = (), changes: dict | None = None
) -> None:
    """`--device` (default: CUDA if available; one this machine has) with `device_help`, `--dtype` (one of
    `MODEL_DTYPES`), then each option of `RUN_OPTIONS` whose flag is not in `omit`, with the fields (`default`,
    `help`) that `changes[flag]` gives it, if any."""
    parser.add_argument("--device", type=arguments.device, default=DEFAULT_DEVICE, help=device_help)
    parser.add_argument("--dtype", choices=MODEL_DTYPES, default="float32", help="model and input dtype")
    for option in RUN_OPTIONS:
        if option.flag not in omit:
            option = replace(option, **(changes or {}).get(option.flag, {}))
            parser.add_argument(option.flag, type=option.type, default=option.default, help=option.help)


def run_config(args: argparse.Namespace) -> dict:
    """The run options of a worker config (the fields of `WorkerConfig` but `workload`) from `args`."""
    return {name: getattr(args, name) for name in RUN_KEYS}


def worker_config(args: argparse.Namespace, workload: dict) -> WorkerConfig:
    """The worker config of a benchmark's `args` and `workload`."""
    return WorkerConfig(**run_config(args), workload=workload)
