"""`tileblend bench parallel` and examples/parallel_decode.py, at tiny sizes on gloo (a few processes each)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tileblend.cli import main as tileblend


pytestmark = pytest.mark.slow  # starts processes: not in the fast tier (`-m 'not slow'`)


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_parallel_benchmark_reports_both_arms_and_equal_outputs(tmp_path, capsys):
    record_path = tmp_path / "parallel.json"
    code = tileblend(
        ["bench", "parallel", "--preset", "small", "--size", "128", "--nproc", "2", "--device", "cpu"]
        + ["--reps", "1", "--warmup", "0", "--timeout", "300", "--json", str(record_path)]
    )
    record = json.loads(record_path.read_text())

    assert code == 0
    assert record["outputs_equal"] is True
    assert "outputs bitwise equal: yes" in capsys.readouterr().out
    assert len(record["ranks"]) == 2 and record["single"]["median_ms"] > 0
    reports = [rank["report"] for rank in record["ranks"]]
    assert reports[0]["tiles"] == 9 and sum(report["own_tiles"] for report in reports) == 9
    assert reports[0]["sent"] == reports[1]["received"] > 0 and reports[1]["sent"] == reports[0]["received"] > 0
    assert all(rank["peak_memory_bytes"] > 0 for rank in record["ranks"])
    assert record["speedup"] == record["single_median_ms"] / record["parallel_median_ms"]


def processes_mentioning(text: str) -> list[int]:
    """The PIDs of the running processes whose command line contains `text` (Linux /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
def test_an_arm_past_its_timeout_is_killed_with_its_ranks(tmp_path, capsys):
    """torchrun and both ranks go when the parallel arm runs past its timeout (no orphans), with one line, exit 3."""
    import time

    from tileblend.bench import parallel
    from tileblend.bench.options import worker_config
    from tileblend.cli import build_parser

    args = build_parser().parse_args(["bench", "parallel", "--preset", "small", "--size", "128", "--device", "cpu"])
    args.reps = 100_000  # far past the timeout
    config = worker_config(args, parallel.decode.workload_config(args))
    out = tmp_path / "parallel-arm"
    started = time.monotonic()
    with pytest.raises(parallel.ArmTimeout, match="ran past --timeout 3 s; it and its ranks were killed"):
        parallel._run_arm(config, 2, out, timeout=3)
    assert time.monotonic() - started < 30
    time.sleep(1)
    assert processes_mentioning(str(out)) == []  # the ranks' command lines hold the output folder

    assert tileblend(["bench", "parallel", "--preset", "small", "--size", "128", "--timeout", "0.5"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ran past --timeout 0.5 s" in err


def test_parallel_decode_example_under_torchrun():
    completed = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
        + [str(EXAMPLES / "parallel_decode.py"), "--size", "128"],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore"),
    )

    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "bitwise equal to the single-device tiled decode: yes" in completed.stdout
    assert "rank 1: " in completed.stdout and " of 9 tiles" in completed.stdout


@pytest.mark.cuda(devices=2)
def test_parallel_decode_example_on_nccl():
    completed = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
        + [str(EXAMPLES / "parallel_decode.py"), "--size", "512", "--device", "cuda"],
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "bitwise equal to the single-device tiled decode: yes" in completed.stdout
