"""User errors on the command line: one usage error, exit 2, before any work (exit 1 means a real mismatch)."""

import importlib.util
import json
import os

import pytest
import torch

from tileblend import arguments
from tileblend.bench.records import write_record
from tileblend.cli import main as tileblend
from tileblend.output import OutputError


NO_CUDA = "sees no cuda device on this machine"
META = "the meta device holds no values to compare or time"

CASES = [
    (["verify", "--device", "meta"], META),
    (["bench", "blend", "--device", "meta"], META),
    (["bench", "decode", "--device", "meta"], META),
    (["bench", "pipeline", "--device", "meta"], META),
    (["bench", "compile", "--device", "meta"], META),
    (["bench", "parallel", "--device", "meta"], META),
    (["verify", "--device", "nonsense"], "'nonsense' is not a torch device"),
    (["bench", "decode", "--threads", "-1"], "argument --threads: '-1' is not an integer of at least 1"),
    (["bench", "blend", "--threads", "0"], "argument --threads: '0' is not an integer of at least 1"),
    (["bench", "decode", "--tile", "0"], "argument --tile: '0' is not an integer of at least 1"),
    (["bench", "parallel", "--tile", "-8"], "argument --tile: '-8' is not an integer of at least 1"),
    (["bench", "decode", "--frames", "0"], "argument --frames: '0' is not an integer of at least 1"),
    (["bench", "pipeline", "--reps", "0"], "argument --reps: '0' is not an integer of at least 1"),
    (["bench", "parallel", "--nproc", "1"], "argument --nproc: '1' is not an integer of at least 2"),
    (["bench", "compile", "--warmup", "-1"], "argument --warmup: '-1' is not an integer of at least 0"),
    (["bench", "decode", "--size", "0"], "is not a positive SIZE or HEIGHTxWIDTH"),
]
CASES += [
    (["bench", "blend", "--repeats", "0"], "argument --repeats: '0' is not an integer of at least 1"),
    (["bench", "blend", "--repeats", "-1"], "argument --repeats: '-1' is not an integer of at least 1"),
    (["bench", "blend", "--extents", "100000"], "argument --extents: '100000' is larger than the 512 rows"),
]
if not torch.cuda.is_available():
    CASES += [
        (["verify", "--device", "cuda"], NO_CUDA),
        (["bench", "blend", "--device", "cuda"], NO_CUDA),
        (["bench", "decode", "--device", "cuda:0"], "sees no cuda:0 device"),
        (["bench", "parallel", "--device", "cuda"], NO_CUDA),
    ]


@pytest.mark.parametrize("argv, message", CASES, ids=[" ".join(argv) for argv, _ in CASES])
def test_user_errors_exit_2_with_the_reason(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        tileblend(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_verify_json_goes_into_a_new_directory(tmp_path):
    """`verify --json` into a directory that does not exist yet creates it (it used to fail after the whole run)."""
    path = tmp_path / "new" / "dir" / "verify.json"
    assert (
        tileblend(["verify", "--quick", "--device", "cpu", "--dtype", "float32", "--no-progress", "--json", str(path)])
        == 0
    )
    records = json.loads(path.read_text())
    assert records and all(record["check"] == "method" and record["exact"] for record in records)


@pytest.mark.parametrize("benchmark", ["decode", "parallel"])
def test_an_output_larger_than_memory_is_refused_with_what_it_needs(benchmark, capsys):
    """1,000,000 px square: the output alone is about 11 TiB in float32; said before any work, exit 2."""
    assert tileblend(["bench", benchmark, "--preset", "small", "--size", "1000000", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "the decoded output alone would take 11175.9 GiB and cpu has" in err and err.count("\n") == 1


JSON_COMMANDS = [
    ["verify", "--quick"],
    ["bench", "blend"],
    ["bench", "launches"],
    ["bench", "decode"],
    ["bench", "compile"],
    ["bench", "parallel"],
]


@pytest.mark.parametrize("command", JSON_COMMANDS, ids=[" ".join(command) for command in JSON_COMMANDS])
def test_an_unwritable_json_path_is_refused_before_any_work(command, tmp_path, capsys):
    """A folder, or a path under a file: one usage error, exit 2, before the run (it used to fail after it, exit 1)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for path, message in ((tmp_path, "is a folder, not a file"), (blocker / "x.json", "is not a folder this user")):
        with pytest.raises(SystemExit) as exit_info:
            tileblend([*command, "--json", str(path)])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


def test_plot_without_matplotlib_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    """`--plot` needs the `[bench]` extra: said at once, exit 2 (it used to fail after all the work, exit 1)."""
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *args: None if name == "matplotlib" else real_find_spec(name, *args)
    )
    with pytest.raises(SystemExit) as exit_info:
        tileblend(["bench", "decode", "--plot", str(tmp_path / "plot.png")])
    assert exit_info.value.code == 2
    assert "needs matplotlib: pip install 'tileblend[bench]'" in capsys.readouterr().err


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
@pytest.mark.parametrize("command", JSON_COMMANDS, ids=[" ".join(command) for command in JSON_COMMANDS])
def test_a_json_path_in_a_folder_that_takes_no_new_files_is_refused_before_any_work(command, capsys):
    """/proc exists and, for root, passes every permission check, yet takes no new file: the check tries to create."""
    with pytest.raises(SystemExit) as exit_info:
        tileblend([*command, "--json", "/proc/nope.json"])
    assert exit_info.value.code == 2
    assert "cannot write /proc/nope.json: No such file or directory" in capsys.readouterr().err
    assert not os.path.exists("/proc/nope.json")


def test_the_json_check_leaves_no_file_and_an_existing_one_as_it_was(tmp_path):
    new, existing = tmp_path / "new.json", tmp_path / "old.json"
    existing.write_text("kept")
    assert arguments.output_file(str(new)) == str(new) and not new.exists()
    assert arguments.output_file(str(tmp_path / "a" / "b.json")) and not (tmp_path / "a").exists()
    assert arguments.output_file(str(existing)) and existing.read_text() == "kept"


FAILING_WRITES = [
    ["verify", "--quick", "--device", "cpu", "--dtype", "float32", "--no-progress"],
    ["bench", "blend", "--seams", "sd", "--method", "blend_v", "--extents", "2", "--dtype", "float32"]
    + ["--repeats", "1", "--budget", "0"],
]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command", FAILING_WRITES, ids=[" ".join(command[:2]) for command in FAILING_WRITES])
def test_a_write_that_fails_after_the_run_is_one_line_and_the_results_stay_printed(command, capsys):
    """/dev/full opens for writing and then fails (disk full): one line naming the file and the error, exit 2."""
    assert tileblend([*command, "--json", "/dev/full"]) == 2
    out, err = capsys.readouterr()
    assert err == f"tileblend {command[0]}: error: cannot write /dev/full: No space left on device\n"
    assert "float32" in out  # the table printed before the write


def test_every_output_write_reports_its_failure_as_an_output_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(OutputError, match=f"cannot write {blocker}/x.json: "):
        write_record(blocker / "x.json", {})


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_plot_that_cannot_be_written_is_an_output_error():
    """matplotlib's savefig given a path loses a failed write (/dev/full): the plot is written through a file."""
    pytest.importorskip("matplotlib")
    from tileblend.bench.plot import write_plot
    from tileblend.output import writing

    summary = {"arms": {"A": {"samples_ms": [[1.0, 2.0]]}, "B": {"samples_ms": [[1.0]]}}, "speedups": [1.5]}
    with pytest.raises(OutputError, match="cannot write /dev/full: No space left on device"):
        with writing("/dev/full") as path:
            write_plot(path, "title", summary)
