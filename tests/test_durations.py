"""`make durations` (utils/durations.py): the work read from each command's output, the CPU seconds of its children,
and the table written between its markers only."""

import datetime
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def durations() -> ModuleType:
    spec = importlib.util.spec_from_file_location("durations", REPO / "utils" / "durations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_work_is_read_from_the_output(durations):
    verify = "...\n176 of 176 method/dtype pairs exact on cpu.\n...\n90 of 96 model/path/dtype runs exact with"
    assert durations.count_work("verify", verify) == "176 method/dtype pairs, 96 model runs"
    assert durations.count_work("verify", "176 of 176 method/dtype pairs exact") == "176 method/dtype pairs"
    bench = "3 pairs of processes (A B, B A, ...), 1 warmup + 5 timed calls each"
    assert durations.count_work("bench", bench) == "6 processes, 42 model calls"


def test_a_command_is_timed_with_the_cpu_of_its_children(durations):
    spin = "import time\nend = time.process_time() + 0.2\nwhile time.process_time() < end: pass\nprint('x')"
    row = durations.run(durations.Command("spin", [sys.executable, "-c", spin + "\nraise SystemExit(3)"], ""))
    assert row["cpu"] >= 0.2 and row["wall"] > 0 and row["exit"] == 3 and len(row["load"]) == 2


def test_the_table_replaces_only_what_lies_between_the_markers(durations, tmp_path):
    doc = tmp_path / "results.md"
    doc.write_text(f"# Results\nbefore\n{durations.BEGIN}\nold table\n{durations.END}\nafter\n")
    row = {"command": "make demo", "wall": 12.3, "cpu": 20.6, "load": (1.0, 2.5), "work": "176 pairs", "exit": 0}
    text = durations.table([row], datetime.datetime(2026, 12, 7, 13, 0))
    durations.write_between_markers(doc, text)
    content = doc.read_text()
    assert content.startswith("# Results\nbefore\n") and content.endswith(f"{durations.END}\nafter\n")
    assert "old table" not in content and "| `make demo` | 12 | 21 | 1.0, 2.5 | 176 pairs | 0 |" in content
    assert "on 2026-12-07 13:00 UTC" in content

    unmarked = tmp_path / "unmarked.md"
    unmarked.write_text("no markers\n")
    with pytest.raises(SystemExit, match="has no <!-- durations:begin -->"):
        durations.write_between_markers(unmarked, text)
