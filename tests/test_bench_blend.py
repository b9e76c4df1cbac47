"""`tileblend bench blend` on a tiny subset: the table it prints and the JSON records it writes."""

import json

import diffusers
import torch

from tileblend.cli import main


ROW_KEYS = {"method", "dtype", "shape", "extent", "loop_ms", "vectorized_ms", "speedup", "loop_ops", "vectorized_ops"}


def test_table_and_json(tmp_path, capsys):
    report = tmp_path / "bench.json"
    arguments = ["bench", "blend", "--extents", "1", "4", "--dtype", "float32", "--repeats", "4", "--rounds", "2"]
    assert main([*arguments, "--json", str(report)]) == 0

    data = json.loads(report.read_text())
    machine = data["machine"]
    assert {"platform", "cpu", "gpu", "torch", "diffusers"} <= set(machine)
    assert machine["torch"] == torch.__version__ and machine["diffusers"] == diffusers.__version__
    rows = data["rows"]
    assert [(row["method"], row["extent"]) for row in rows] == [
        (method, extent) for method in ("blend_v", "blend_h", "blend_t") for extent in (1, 4)
    ]
    for row in rows:
        assert ROW_KEYS <= set(row)
        assert row["dtype"] == "float32"
        assert row["shape"] == ([1, 3, 512, 32, 32] if row["method"] == "blend_t" else [1, 3, 512, 512])
        assert row["loop_ms"] > 0 and row["vectorized_ms"] > 0
        assert row["speedup"] == row["loop_ms"] / row["vectorized_ms"]
        assert row["loop_ops"] == 7 * row["extent"]
        assert 0 < row["vectorized_ops"] < 20

    table = capsys.readouterr().out
    assert "| method | dtype | tile shape | extent | loop ms | vectorized ms | speedup |" in table
    lines = [line for line in table.splitlines() if line.startswith("| blend_")]
    assert len(lines) == len(rows)
    assert lines[0].startswith("| blend_v | float32 | 1x3x512x512 | 1 |")
    assert lines[-1].startswith("| blend_t | float32 | 1x3x512x32x32 | 4 |")
