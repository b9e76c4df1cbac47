"""`tileblend bench KIND`: one subcommand per benchmark module."""

from . import blend, compile, decode, launches, memory, parallel, pipeline


BENCHMARKS = (blend, decode, pipeline, compile, parallel, launches, memory)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("bench", help="benchmark loop vs vectorized blends", description=__doc__)
    kinds = parser.add_subparsers(dest="benchmark", required=True, metavar="KIND")
    for benchmark in BENCHMARKS:
        benchmark.add_parser(kinds)
