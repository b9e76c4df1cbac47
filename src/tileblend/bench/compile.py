"""`tileblend bench compile`: `torch.compile` of a tiled decode with diffusers' loops (arm A) vs tileblend (arm B).

For each model of the registry (`tileblend.tiny_models`, tiny random-weight VAEs whose tiled decode reaches the blends),
each backend and each arm, a fresh process (`tileblend.bench.pairs.run_worker`) with an empty Inductor cache
directory builds the model, runs the tiled decode once eagerly (recording its blend calls), then compiles it with
`torch.compile(backend=..., dynamic=False)` through a backend that counts the FX graphs and nodes Dynamo hands over
before delegating to the real backend, and reports:

- compile s: the first compiled call (tracing, the backend's compilation and one run); one sample per process, the
  median over `--pairs` processes per arm;
- graphs, FX nodes: what Dynamo produced (more than one graph means graph breaks). The loop unrolls about 7 nodes per
  blended row; tileblend's blend is a handful per call;
- steady ms: the median of `--reps` compiled calls after `--warmup` more (median over processes when `--pairs` > 1);
- whether arm B's compiled output equals arm A's bit for bit, and whether each equals the eager decode. Inductor
  drops some of eager mode's roundings in float16 and bfloat16, in different places for the loop and for tileblend, so
  there B and A may differ (docs/design.md, "torch.compile"); everywhere else they must be equal.

This module is also the worker: `python -m tileblend.bench.compile --arm A|B --config JSON --result PATH --save PATH`.
"""

import argparse
import os
import statistics
import sys
from pathlib import Path

import torch

from .. import arguments
from .. import tiny_models as registry
from ..blend import DTYPES
from ..calls import record_blends
from ..compare import bitwise_equal
from ..timing import median_ms, time_calls, timed
from .machine import environment
from .options import add_benchmark_parser, add_run_options, run_config, worker_config
from .pairs import run_arms
from .records import CompileResult, WorkerConfig, write_record, write_result
from .worker import start_arm, worker_arguments


WORKER_MODULE = "tileblend.bench.compile"
BACKENDS = ("eager", "aot_eager", "inductor")
RUN_OPTION_CHANGES = {
    "--pairs": {"default": 1, "help": "A/B process pairs per model and backend (default: 1)"},
    "--reps": {"help": "timed compiled calls per process (default: 5)"},
    "--warmup": {"help": "untimed compiled calls after the first (default: 1)"},
    "--threads": {"help": "torch CPU threads per worker (default: torch's)"},
}
"""How the run options of `bench compile` differ from `tileblend.bench.options.RUN_OPTIONS`."""


class CountingBackend:
    """A `torch.compile` backend that counts the graphs and FX nodes it is given, then compiles with `backend`."""

    def __init__(self, backend: str):
        self.delegate = torch._dynamo.lookup_backend(backend)
        self.graphs = 0
        self.nodes = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1
        self.nodes += len(graph_module.graph.nodes)
        return self.delegate(graph_module, example_inputs)


def worker_main(argv: list[str] | None = None) -> int:
    """One process: eager decode, compile (timed first call), steady-state calls; writes its `CompileResult`."""
    args = worker_arguments(
        "One arm of `tileblend bench compile` (started by the parent).",
        "where to torch.save the compiled output",
        argv,
    )
    # A folder of its own beside the result, in the parent's temporary folder: a cold compile, nothing reused.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(args.result).with_suffix(".inductor-cache"))
    result, output = compile_arm(args.arm, args.config)
    if args.save:
        torch.save(output.detach().cpu(), args.save)
    write_result(args.result, result)
    return 0


def compile_arm(arm: str, config: WorkerConfig) -> tuple[CompileResult, torch.Tensor]:
    """Decode `config.workload["model"]` eagerly, then compiled with `config.workload["backend"]` (the first call timed
    apart); return what was measured and the compiled output."""
    device, dtype = torch.device(config.device), DTYPES[config.dtype]
    start_arm(arm, config)
    entry = registry.MODELS[config.workload["model"]]
    model = registry.build_model(entry, dtype, device, seed=config.seed)
    latents = registry.make_input(entry, "decode", dtype, device, seed=config.seed)

    def decode(x):
        return registry.run_path(model, entry, "decode", x)

    with record_blends(type(model)) as calls:
        eager = decode(latents)
    backend = CountingBackend(config.workload["backend"])
    compiled = torch.compile(decode, backend=backend, dynamic=False)
    output, compile_s = timed(lambda: compiled(latents), device)
    samples = time_calls(lambda: compiled(latents), device, repeats=config.reps, warmup=config.warmup)
    result = CompileResult(
        arm=arm,
        blend_calls=len(calls),
        graphs=backend.graphs,
        fx_nodes=backend.nodes,
        compile_s=compile_s,
        samples_ms=[sample * 1e3 for sample in samples],
        steady_ms=median_ms(samples),
        equal_to_eager=bitwise_equal(eager, output),
    )
    return result, output


def run_case(config: WorkerConfig, pairs: int, progress=lambda line: print(line, flush=True)) -> dict:
    """Run `pairs` pairs of worker processes (A B, B A, ...; `tileblend.bench.pairs.run_arms`) for the model and
    backend of `config.workload`, printing one line per process with `progress`; return the summary row."""
    model, backend = config.workload["model"], config.workload["backend"]

    def show_progress(index: int, pair: int, arm: str, result: CompileResult) -> None:
        progress(
            f"  {model} {backend} arm {arm} (pair {pair + 1}): compile {result.compile_s:.1f} s, {result.graphs} "
            f"graphs, {result.fx_nodes} FX nodes, steady {result.steady_ms:.1f} ms"
        )

    nothing_blended = f"no blend method ran in the tiled decode of {model}"
    runs = run_arms(WORKER_MODULE, config, pairs, CompileResult, nothing_blended, show_progress)
    arms = {
        arm: {
            "blend_calls": results[0].blend_calls,
            "graphs": results[0].graphs,
            "fx_nodes": results[0].fx_nodes,
            "compile_s": statistics.median(result.compile_s for result in results),
            "compile_samples_s": [result.compile_s for result in results],
            "steady_ms": statistics.median(result.steady_ms for result in results),
            "samples_ms": [result.samples_ms for result in results],
            "equal_to_eager": all(result.equal_to_eager for result in results),
        }
        for arm, results in runs.results.items()
    }
    return {
        "model": model,
        "class": registry.MODELS[model].class_name,
        "backend": backend,
        "arms": arms,
        "outputs_equal": runs.outputs_equal,
    }


def format_table(rows: list[dict], pairs: int, reps: int) -> str:
    """A markdown table: one line per model, backend and arm."""
    lines = [
        "| model | backend | arm | blend calls | graphs | FX nodes | compile s | steady ms | B == A | == eager |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for row in rows:
        for arm, label in (("A", "loops"), ("B", "tileblend")):
            stats = row["arms"][arm]
            same = ("yes" if row["outputs_equal"] else "NO") if arm == "B" else ""
            lines.append(
                f"| {row['model']} ({row['class']}) | {row['backend']} | {label} | {stats['blend_calls']} | "
                f"{stats['graphs']} | {stats['fx_nodes']} | {stats['compile_s']:.1f} | {stats['steady_ms']:.1f} | "
                f"{same} | {'yes' if stats['equal_to_eager'] else 'no'} |"
            )
    compile_note = "a single sample (one process per arm)" if pairs == 1 else f"median of {pairs} processes"
    lines.append(
        f"\ncompile s: first compiled call, {compile_note}; steady ms: median of {reps} compiled calls per process"
        + ("" if pairs == 1 else f", median over {pairs} processes")
        + "; FX nodes: all graphs Dynamo produced; B == A: compiled outputs bitwise equal; == eager: the compiled "
        "output equals the same arm's eager decode bitwise"
    )
    return "\n".join(lines)


def add_parser(subparsers) -> None:
    parser = add_benchmark_parser(
        subparsers,
        "compile",
        "torch.compile of a tiled decode: graph size, compile time and steady time, loops vs tileblend",
        __doc__,
        main,
    )
    parser.add_argument(
        "--models",
        nargs="+",
        choices=[entry.name for entry in registry.REGISTRY if entry.decode is not None and entry.decode.runs],
        default=["kl", "hunyuan-video"],
        help="registry models whose tiled decode is compiled (default: kl hunyuan-video)",
    )
    parser.add_argument(
        "--backends", nargs="+", choices=BACKENDS, default=["eager", "inductor"], help="torch.compile backends"
    )
    add_run_options(parser, "torch device", changes=RUN_OPTION_CHANGES)
    parser.add_argument(
        "--json", metavar="PATH", type=arguments.output_file, help="write the rows, config and machine as JSON"
    )


INDUCTOR_EXACT_FROM = "2.13"
"""The first torch release on which Inductor keeps the blends bitwise (docs/design.md, "torch.compile"): 2.4.1 to
2.6.0 were measured inexact in every dtype, 2.7 to 2.12 not measured."""


def main(args: argparse.Namespace) -> int:
    """Run every model (of those the installed diffusers has) and backend; print the table; returns 1 if A's and B's
    outputs differ where they must be equal (every backend but Inductor, and Inductor in float32 and float64 from torch
    2.13 on)."""
    print(f"tileblend bench compile: {args.dtype} on {args.device}, {args.pairs} pair(s) of processes per case")
    models = []
    for model in args.models:
        missing = registry.missing_class(registry.MODELS[model])
        if missing:
            print(f"  {model}: skipped: {missing}")
        else:
            models.append(model)
    rows = [
        run_case(worker_config(args, {"model": model, "backend": backend}), args.pairs)
        for model in models
        for backend in args.backends
    ]
    print()
    print(format_table(rows, args.pairs, args.reps))
    must_equal = args.dtype in ("float32", "float64") and torch.__version__ >= INDUCTOR_EXACT_FROM
    mismatches = [
        f"{row['model']} {row['backend']}"
        for row in rows
        if not row["outputs_equal"] and (must_equal or row["backend"] != "inductor")
    ]
    if mismatches:
        print("MISMATCH: compiled loops and compiled tileblend differ: " + ", ".join(mismatches), file=sys.stderr)
    if args.json:
        record = {"benchmark": "compile", "config": run_config(args) | {"pairs": args.pairs}, "rows": rows}
        record |= environment(args.device, args.threads)
        write_record(args.json, record)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(worker_main())
