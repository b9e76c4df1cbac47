"""`tileblend bench blend` on a tiny subset: the table it prints and the JSON records it writes."""

import json

import diffusers
import torch

from tileblend.bench.blend import VIDEO_SEAMS, summary
from tileblend.blend import BLEND_AXES
from tileblend.cli import main


ROW_KEYS = {
    "seam",
    "method",
    "dtype",
    "shape",
    "extent",
    "loop_ms",
    "vectorized_ms",
    "speedup",
    "loop_ops",
    "vectorized_ops",
}


def test_table_and_json(tmp_path, capsys):
    report = tmp_path / "bench.json"
    arguments = ["bench", "blend", "--seams", "sd", "--extents", "1", "4", "--dtype", "float32", "--repeats", "4"]
    arguments += ["--budget", "0.5"]
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
        assert row["seam"] == "SD" and row["dtype"] == "float32"
        assert row["shape"] == ([1, 3, 512, 32, 32] if row["method"] == "blend_t" else [1, 3, 512, 512])
        assert row["loop_ms"] > 0 and row["vectorized_ms"] > 0
        assert row["speedup"] > 0
        assert row["loop_ops"] == 7 * row["extent"]
        assert 0 < row["vectorized_ops"] < 20

    table = capsys.readouterr().out
    assert "| seam | method | dtype | tile shape | extent | loop ms | vectorized ms | speedup |" in table
    lines = [line for line in table.splitlines() if line.startswith("| SD | blend_")]
    assert len(lines) == len(rows)
    assert lines[0].startswith("| SD | blend_v | float32 | 1x3x512x512 | 1 |")
    assert lines[-1].startswith("| SD | blend_t | float32 | 1x3x512x32x32 | 4 |")
    assert "worst speedup: SD blend_" in table


def test_video_seams_are_5d_and_cover_every_method():
    methods = set()
    for name, seam_methods, shape, extent in VIDEO_SEAMS:
        assert len(shape) == 5, name
        for method in seam_methods:
            assert 0 < extent <= shape[BLEND_AXES[method]], name
            methods.add(method)
    assert methods == set(BLEND_AXES)


def test_summary_names_the_worst_row_and_every_row_slower_than_the_loop():
    def row(seam, speedup, vectorized_ops):
        return {
            "seam": seam,
            "method": "blend_v",
            "dtype": "float16",
            "shape": [1, 3, 8, 8],
            "extent": 8,
            "speedup": speedup,
            "loop_ops": 56,
            "vectorized_ops": vectorized_ops,
        }

    text = summary([row("A", 3.0, 11), row("B", 0.52, 12), row("C", 0.97, 12), row("D", 1.5, 11)])
    assert text.splitlines() == [
        "worst speedup: B blend_v float16 1x3x8x8 extent 8: 0.52x",
        "slower than the loop: B blend_v float16 1x3x8x8 extent 8: 0.52x; C blend_v float16 1x3x8x8 extent 8: 0.97x",
    ]
