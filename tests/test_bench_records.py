"""The records `tileblend bench` passes between processes and writes (`tileblend.bench.records`), and the one table of
run options and the one parser helper its commands share (`tileblend.bench.options`): no worker process, no model."""

import argparse
import json

import pytest

from tileblend.bench.cli import BENCHMARKS
from tileblend.bench.records import (
    ArmResult,
    CompileResult,
    ParallelArmResult,
    WorkerConfig,
    read_result,
    write_record,
    write_result,
)
from tileblend.cli import build_parser


CONFIG = WorkerConfig(
    device="cpu",
    dtype="float16",
    seed=7,
    threads=None,
    warmup=0,
    reps=3,
    workload={"preset": "small", "model": None, "size": [128, 96], "frames": None, "tile": 64},
)

RESULTS = [
    ArmResult(
        arm="B",
        tileblend_enabled=True,
        samples_ms=[1.5, 2.25],
        median_ms=1.875,
        peak_memory_bytes=3 * 2**20,
        peak_memory_kind="process peak RSS",
        blend_calls=12,
        blend_ms=0.5,
        blend_share=0.25,
        output_shape=[1, 3, 128, 96],
    ),
    CompileResult(
        arm="A",
        blend_calls=4,
        graphs=1,
        fx_nodes=321,
        compile_s=2.5,
        samples_ms=[10.0],
        steady_ms=10.0,
        equal_to_eager=False,
    ),
    ParallelArmResult(
        samples_ms=[30.0, 31.0],
        median_ms=30.5,
        peak_memory_bytes=2**30,
        peak_memory_kind="process peak RSS",
        report={"tiles": 9, "own_tiles": 5, "sent": 1024, "received": 2048},
        tiles=9,
    ),
]


def test_worker_config_round_trips_through_its_json():
    assert WorkerConfig.from_json(CONFIG.to_json()) == CONFIG


def test_worker_config_is_flat_workload_first():
    """A record's `config` is one flat object, the workload's keys then the run options', as before the records."""
    assert list(CONFIG.as_dict()) == ["preset", "model", "size", "frames", "tile"] + [
        "device",
        "dtype",
        "seed",
        "threads",
        "warmup",
        "reps",
    ]
    assert WorkerConfig.from_dict(CONFIG.as_dict()) == CONFIG


@pytest.mark.parametrize("result", RESULTS, ids=lambda result: type(result).__name__)
def test_worker_result_round_trips_through_its_file(tmp_path, result):
    path = tmp_path / "result.json"
    write_result(path, result)
    assert read_result(path, type(result)) == result


def test_record_is_indented_json_in_a_new_folder(tmp_path):
    record = {"benchmark": "decode", "config": CONFIG.as_dict(), "arms": {"A": {"samples_ms": [[1.0, 2.0]]}}}
    path = tmp_path / "out" / "decode.json"
    write_record(path, record)
    text = path.read_text(encoding="utf-8")
    assert json.loads(text) == record
    assert text == json.dumps(record, indent=2) + "\n"


@pytest.mark.parametrize(
    "command, defaults",
    [
        ("decode", {"pairs": 3, "reps": 5, "warmup": 1, "seed": 0, "threads": None}),
        ("pipeline", {"pairs": 3, "reps": 5, "warmup": 1, "seed": 0, "threads": None}),
        ("compile", {"pairs": 1, "reps": 5, "warmup": 1, "seed": 0, "threads": None}),
        ("parallel", {"reps": 3, "warmup": 1, "seed": 0, "threads": 1}),
    ],
)
def test_each_command_takes_its_run_options_from_the_one_table(command, defaults):
    args = vars(build_parser().parse_args(["bench", command]))
    assert {name: args[name] for name in defaults} == defaults
    assert ("pairs" in args) == ("pairs" in defaults)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", command, "--reps", "0"])  # every command's --reps is a positive integer


@pytest.mark.parametrize("benchmark", BENCHMARKS, ids=lambda module: module.__name__.rsplit(".", 1)[-1])
def test_each_command_is_built_by_the_one_benchmark_parser(benchmark):
    """`tileblend bench NAME --help` shows the benchmark module's docstring as written, and NAME runs its `main`."""
    name = benchmark.__name__.rsplit(".", 1)[-1]
    subparsers = argparse.ArgumentParser().add_subparsers()
    benchmark.add_parser(subparsers)
    parser = subparsers.choices[name]
    assert parser.description == benchmark.__doc__
    assert parser.formatter_class is argparse.RawDescriptionHelpFormatter
    assert parser.get_default("handler") is benchmark.main
