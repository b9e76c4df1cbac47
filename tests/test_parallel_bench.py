"""`tileblend bench parallel` and examples/parallel_decode.py, at tiny sizes on gloo (a few processes each)."""

import contextlib
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


def default_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(condition, seconds: float = 240.0) -> None:
    import time

    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "the processes did not start"
        time.sleep(0.2)


# Ctrl-C that lands while an arm's Popen has started the child but not returned: the arm still stops the child. The
# script sends itself SIGINT from inside Popen (made deterministic by a wrapper), in a process of its own so that the
# signal reaches the main thread.
CTRL_C_INSIDE_POPEN = """
import os, signal, subprocess, sys, types
from tileblend.bench import parallel

started = []
real_popen = subprocess.Popen

def popen(command, **kwargs):
    started.append(real_popen([sys.executable, "-c", "import time; time.sleep(600)"], **kwargs))
    os.kill(os.getpid(), signal.SIGINT)
    return started[-1]

parallel.subprocess.Popen = popen
try:
    parallel._run_arm(types.SimpleNamespace(to_json=lambda: "{}", threads=1), 1, parallel.Path(sys.argv[1]), 600)
except KeyboardInterrupt:
    print("interrupted", started[0].poll() is not None)
    started[0].kill()  # a no-op once it was stopped
"""


def test_ctrl_c_while_an_arm_starts_stops_it(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-c", CTRL_C_INSIDE_POPEN, str(tmp_path / "arm")],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=default_sigint,
    )
    assert completed.stdout == "interrupted True\n", completed.stdout + completed.stderr


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
def test_ctrl_c_stops_the_benchmark_and_every_process_it_started(tmp_path):
    """Ctrl-C (SIGINT to the command, which the arms' own sessions do not get from a terminal): one line, exit 130, no
    process left, no JSON; the same for an arm under torchrun and its ranks."""
    import signal

    try:
        env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONWARNINGS="ignore")
        record = tmp_path / "parallel.json"
        command = [sys.executable, "-m", "tileblend", "bench", "parallel", "--preset", "small", "--size", "128"]
        command += ["--device", "cpu", "--reps", "100000", "--json", str(record)]
        # SIGINT as in a terminal: a suite started in the background by a non-interactive shell (as a CI runner may)
        # ignores SIGINT, its children inherit that, and Python then never raises KeyboardInterrupt.
        bench = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint
        )
        wait_for(lambda: len(processes_mentioning(f"{tmp_path}/tileblend-parallel-")) >= 1)
        bench.send_signal(signal.SIGINT)
        _, err = bench.communicate(timeout=60)
        assert bench.returncode == 130
        assert err == "tileblend bench parallel: interrupted; its processes were stopped, nothing written\n"
        assert processes_mentioning(str(tmp_path)) == [] and not record.exists()

        script = tmp_path / "arm.py"
        script.write_text(
            "import sys\n"
            "from pathlib import Path\n"
            "from tileblend.bench import parallel\n"
            "from tileblend.bench.options import worker_config\n"
            "from tileblend.cli import build_parser\n"
            "args = build_parser().parse_args(['bench', 'parallel', '--preset', 'small', '--size', '128', '--reps', "
            "'100000'])\n"
            "config = worker_config(args, parallel.decode.workload_config(args))\n"
            "try:\n"
            "    parallel._run_arm(config, 2, Path(sys.argv[1]), timeout=300)\n"
            "except KeyboardInterrupt:\n"
            "    sys.exit(130)\n"
        )
        out = tmp_path / "arm-out"
        arm = subprocess.Popen([sys.executable, str(script), str(out)], env=env, preexec_fn=default_sigint)
        wait_for(lambda: len(processes_mentioning(f"--out\0{out}")) >= 3)  # torchrun and both ranks
        arm.send_signal(signal.SIGINT)
        assert arm.wait(timeout=60) == 130
        assert processes_mentioning(str(out)) == []
    finally:  # a failure here must not leave a benchmark running for hours
        for pid in processes_mentioning(str(tmp_path)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
