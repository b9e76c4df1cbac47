"""`tileblend verify` on the command line: parse the options, run the method and model checks, print the tables and
the verdicts, write the JSON records; the exit code says whether everything was exact."""

import argparse
import json
import sys
import warnings
from dataclasses import asdict

import torch

from .. import arguments
from ..blend import DTYPES
from ..output import writing
from . import method_checks, model_checks, streamed_checks
from .tables import format_method_table, format_model_table


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "verify",
        help="check bitwise parity of every patched blend and every tiled model on this machine",
        description="Compare diffusers' loop blends with tileblend's bit for bit: each method on random tiles, then "
        "tiled encode and decode of a tiny model of every diffusers autoencoder with loop blends, and the "
        "row-streamed tiled decode of every class it covers.",
    )
    default_device = "cuda" if torch.cuda.is_available() else "cpu"
    parser.add_argument(
        "--device", type=arguments.device, default=default_device, help=f"torch device (default: {default_device})"
    )
    parser.add_argument(
        "--dtype",
        nargs="+",
        choices=list(DTYPES),
        default=None,
        help="dtypes to check (default: every dtype the device has for the methods; float32, bfloat16 and float16 "
        "for the models)",
    )
    parser.add_argument(
        "--models",
        nargs="+",
        metavar="NAME",
        help="tiny models whose tiled encode/decode to check, by registry name or diffusers class, globs allowed "
        "(default: all); the method checks always cover every patched method",
    )
    parser.add_argument("--quick", action="store_true", help="method-level checks only, no whole models")
    parser.add_argument(
        "--json",
        metavar="PATH",
        type=arguments.output_file,
        help="also write one JSON record per method and dtype, and per model, path and dtype",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Print the parity tables; return 1 on any mismatch, 2 on a usage error."""
    try:
        device = torch.device(args.device)
        torch.empty(0, device=device)
        entries = [] if args.quick else model_checks.select_entries(args.models)
    except (RuntimeError, ValueError) as error:
        print(f"tileblend verify: error: {error}", file=sys.stderr)
        return 2
    if args.quick and args.models:
        print("tileblend verify: error: --models needs the whole-model checks; drop --quick", file=sys.stderr)
        return 2
    method_names = args.dtype or [name for name in DTYPES if not (name == "float64" and device.type == "mps")]
    model_names = args.dtype or ["float32", "bfloat16", "float16"]
    progress = not args.no_progress

    from diffusers.utils import logging as diffusers_logging

    verbosity = diffusers_logging.get_verbosity()
    diffusers_logging.set_verbosity_error()  # diffusers' dtype-cast advice for each tiny model would break the bar
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            methods = method_checks.verify_methods(device, [DTYPES[name] for name in method_names], progress)
            model_results, streamed_results = [], []
            if entries:  # --quick: no whole models, and no empty bar for them
                model_results = model_checks.verify_models(
                    entries, device, [DTYPES[name] for name in model_names], progress
                )
                streamed_results = streamed_checks.verify_all(
                    entries, device, [DTYPES[name] for name in model_names], progress
                )
    finally:
        diffusers_logging.set_verbosity(verbosity)

    print(format_method_table(methods))
    method_mismatches = [f"{r.cls}.{r.method} ({r.dtype})" for r in methods if not r.exact]
    print(f"\n{len(methods) - len(method_mismatches)} of {len(methods)} method/dtype pairs exact on {device}.")
    model_mismatches = [f"{r.model} {r.path} ({r.dtype})" for r in model_results if not r.ok]
    if model_results:
        print("\n" + format_model_table(model_results))
        ran = [r for r in model_results if r.exact is not None]
        print(
            f"\n{len(ran) - len(model_mismatches)} of {len(ran)} model/path/dtype runs exact with their blends "
            f"called on {device} ({len(model_results) - len(ran)} skipped)."
        )
    streamed_mismatches = [f"{r.model} streamed decode ({r.dtype})" for r in streamed_results if not r.ok]
    if streamed_results:
        print("\nStreamed tiled decode (tileblend.streamed_decode) vs the stock tiled decode:")
        print(streamed_checks.format_streamed_table(streamed_results))
        ran = [r for r in streamed_results if r.exact is not None]
        print(
            f"\n{len(ran) - len(streamed_mismatches)} of {len(ran)} streamed decodes equal to the stock tiled decode "
            f"with their blends called on {device} ({len(streamed_results) - len(ran)} skipped)."
        )
    model_mismatches += streamed_mismatches
    if method_mismatches or model_mismatches:
        print("MISMATCH: " + ", ".join(method_mismatches + model_mismatches), file=sys.stderr)
    if args.json:
        records = [{"check": "method"} | asdict(r) for r in methods]
        records += [{"check": "model"} | asdict(r) | {"ok": r.ok} for r in model_results]
        records += [{"check": "streamed"} | asdict(r) | {"ok": r.ok} for r in streamed_results]
        with writing(args.json) as path:
            path.write_text(json.dumps(records, indent=2), encoding="utf-8")
    return 1 if method_mismatches or model_mismatches else 0
