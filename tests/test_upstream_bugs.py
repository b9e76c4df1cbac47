"""`make upstream-bugs`: each repro script reproduces its bug on the installed diffusers (the pinned release) and on
the snapshot of upstream main (`make upstream-snapshot`), passes once the fix its draft describes is
made, and each issue draft is complete.

The scripts run once per diffusers, in one runner process each, the three processes at the same time: the installed
package, the snapshot (extracted to a temporary folder; without it, as `conftest.upstream_snapshot` says) and a copy of the
installed package with every described fix made (`FIXES`).
"""

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import diffusers
import pytest
from conftest import find_upstream_snapshot

from tileblend.upstream.bugs import cli
from tileblend.upstream.bugs.catalog import BUGS
from tileblend.upstream.bugs.run import ERROR, NOT_REPRODUCED, REPRODUCED, Outcome, run_bugs
from tileblend.upstream.check import extract


pytestmark = pytest.mark.slow  # starts processes: not in the fast tier (`-m 'not slow'`)

REPO = Path(__file__).resolve().parents[1]
PINNED = re.search(r"^diffusers==(\S+)$", (REPO / "constraints.txt").read_text(), re.M).group(1)
SLUGS = [bug.slug for bug in BUGS]

# Each draft's fix, as edits of the installed diffusers' files: (file, text, replacement, which occurrence of the text
# to replace: 1 is the first). Made on a copy, on which every script must then exit cleanly.
HUNYUANIMAGE, REFINER = "autoencoder_kl_hunyuanimage.py", "autoencoder_kl_hunyuanimage_refiner.py"
HUNYUANVIDEO15, MAGVIT = "autoencoder_kl_hunyuanvideo15.py", "autoencoder_kl_magvit.py"
LATENT_SIZE = "height // self.spatial_compression_ratio, : width // self.spatial_compression_ratio"
FRAMEWISE = "if self.use_framewise_{}coding and num_frames > self.tile_sample_min_num_frames"
FIXES = {
    "hunyuanimage-tiled-encode": [
        (HUNYUANIMAGE, "_, _, _, height, width = x.shape", "_, _, height, width = x.shape", 1),
        (HUNYUANIMAGE, "x[:, :, :, i : i + self.tile_sample", "x[:, :, i : i + self.tile_sample", 1),
        (HUNYUANIMAGE, "tile[:, :, :, :row_limit", "tile[:, :, :row_limit", 1),
    ],
    "hunyuanimage-refiner-tiled-encode": [  # tiled_encode's lines, the first of each pair
        (REFINER, "int(tile_latent_min_height * (1 -", "int(self.tile_sample_min_height * (1 -", 1),
        (REFINER, "int(tile_latent_min_width * (1 -", "int(self.tile_sample_min_width * (1 -", 1),
    ],
    "hunyuanimage-refiner-tiled-decode": [  # tiled_decode's lines, the second of each pair
        (REFINER, "int(tile_latent_min_height * self.", "int(self.tile_sample_min_height * self.", 2),
        (REFINER, "int(tile_latent_min_width * self.", "int(self.tile_sample_min_width * self.", 2),
        (REFINER, "= tile_latent_min_height - blend", "= self.tile_sample_min_height - blend", 2),
        (REFINER, "= tile_latent_min_width - blend", "= self.tile_sample_min_width - blend", 2),
    ],
    "hunyuanvideo15-tiled-encode": [
        (
            HUNYUANVIDEO15,
            "or self.tile_latent_min_height",
            "or self.tile_sample_min_height // self.spatial_compression_ratio",
            1,
        ),
        (
            HUNYUANVIDEO15,
            "or self.tile_latent_min_width",
            "or self.tile_sample_min_width // self.spatial_compression_ratio",
            1,
        ),
        (
            HUNYUANVIDEO15,
            "moments = torch.cat(result_rows, dim=-2)",
            f"moments = torch.cat(result_rows, dim=-2)[..., : {LATENT_SIZE}]",
            1,
        ),
    ],
    "magvit-tiled-encode": [
        (
            MAGVIT,
            "tile[:, :, :, :latent_height, :latent_width]",
            "tile[:, :, :, :tile_latent_stride_height, :tile_latent_stride_width]",
            1,
        ),
    ],
    "ltx-temporal-tiled-encode": [
        ("autoencoder_kl_ltx.py", FRAMEWISE.format("de"), FRAMEWISE.format("en"), 1),
    ],
    "ltx2-temporal-tiled-encode": [
        ("autoencoder_kl_ltx2.py", FRAMEWISE.format("de"), FRAMEWISE.format("en"), 1),
    ],
}


def fixed_copy(folder: Path) -> Path:
    """A copy of the installed diffusers package in `folder`, with every edit of `FIXES` made."""
    package = folder / "diffusers"
    shutil.copytree(Path(diffusers.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    for edits in FIXES.values():
        for name, text, replacement, occurrence in edits:
            path = package / "models" / "autoencoders" / name
            parts = path.read_text(encoding="utf-8").split(text)
            assert len(parts) > occurrence, f"{name}: {text!r} occurs {len(parts) - 1} times"
            fixed = text.join(parts[:occurrence]) + replacement + text.join(parts[occurrence:])
            path.write_text(fixed, encoding="utf-8")
    return package


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """The runs against the installed diffusers, the fixed copy and (where present) the snapshot, by name."""
    targets = [("installed", None), ("fixed", fixed_copy(tmp_path_factory.mktemp("fixed")))]
    snapshot = find_upstream_snapshot()
    if snapshot is not None:
        checkout = extract(snapshot, tmp_path_factory.mktemp("snapshot"))
        targets.append(("snapshot", checkout / "src" / "diffusers"))
    return {run.target: run for run in run_bugs(BUGS, targets)}


@pytest.fixture(scope="module")
def snapshot_run(runs, upstream_snapshot):
    return runs["snapshot"]


def outcome(run, slug: str) -> Outcome:
    return next(outcome for outcome in run.outcomes if outcome.bug.slug == slug)


def assert_reproduced(found: Outcome) -> None:
    assert found.verdict == REPRODUCED, found.output
    assert found.line("expected") is not None
    assert found.observed != found.expected


@pytest.mark.parametrize("slug", SLUGS)
def test_reproduced_on_the_pinned_release(runs, slug):
    assert runs["installed"].system["diffusers"] == PINNED
    assert_reproduced(outcome(runs["installed"], slug))


@pytest.mark.parametrize("slug", SLUGS)
def test_reproduced_on_the_snapshot(snapshot_run, slug):
    assert Path(snapshot_run.system["diffusers_file"]).parts[-3:] == ("src", "diffusers", "__init__.py")
    assert_reproduced(outcome(snapshot_run, slug))


@pytest.mark.parametrize("slug", SLUGS)
def test_not_reproduced_once_fixed(runs, slug):
    """The draft's fix, made as `FIXES` says, makes the script pass: it checks the bug and nothing else."""
    found = outcome(runs["fixed"], slug)
    assert found.verdict == NOT_REPRODUCED, found.output
    assert found.line("observed") is not None


def test_verdicts():
    """A clean exit is not reproduced; a failure other than the bug's own is an error, never a reproduction."""
    bug = BUGS[0]
    assert Outcome(bug, "expected: a\nobserved: a\n", failed=False).verdict == NOT_REPRODUCED
    assert Outcome(bug, f"expected: a\nTraceback (most recent call last):\n{bug.signature}\n", True).verdict == (
        REPRODUCED
    )
    other = Outcome(bug, "Traceback (most recent call last):\nImportError: cannot import name 'X'\n", failed=True)
    assert (other.verdict, other.observed, other.expected) == (
        ERROR,
        "ImportError: cannot import name 'X'",
        "(not printed)",
    )


@pytest.mark.parametrize("bug", BUGS, ids=SLUGS)
def test_scripts_are_standalone_and_formatted(bug):
    """torch and diffusers only, as ruff formats them at diffusers' line length."""
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(ast.parse(bug.script))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert imported == {"torch", "diffusers"}
    ruff = [sys.executable, "-m", "ruff", "format", "--isolated", "--line-length", "119", "--check", "-"]
    assert subprocess.run(ruff, input=bug.script, text=True, capture_output=True).returncode == 0


def test_drafts(runs, tmp_path):
    """One draft per bug in the bug report form's sections, the script run verbatim, its output as the logs, no
    placeholder and no local path; the draft of a bug not reproduced is deleted, and nothing else."""
    ordered = [runs[name] for name in ("installed", "snapshot") if name in runs]
    written = cli.write_drafts(ordered, tmp_path)
    assert [path.name for path in written] == [f"{slug}.md" for slug in SLUGS]
    for path, found in zip(written, ordered[-1].outcomes):
        text = path.read_text(encoding="utf-8")
        sections = ["Describe the bug", "Reproduction", "Logs", "System Info"]
        assert re.findall(r"^#+ .*", text, flags=re.M) == [f"# {found.bug.title}"] + [f"### {s}" for s in sections]
        assert f"```python\n{found.bug.script}```" in text
        assert f"```shell\n{found.output.rstrip()}\n```" in text
        assert found.observed in text and found.bug.cause in text and found.bug.fix in text
        assert all(f"{run.system['diffusers']}" in text for run in ordered)
        assert not re.search(r"<fill in>|\$\w|TODO|not printed|/tmp/|/work/|site-packages|\.\./shared", text)
    (tmp_path / "notes.md").write_text("kept")
    assert cli.write_drafts([runs["fixed"]], tmp_path) == []
    assert [path.name for path in tmp_path.iterdir()] == ["notes.md"]
    report = cli.report(ordered[-1])
    assert report.count(f"  {REPRODUCED} ") == len(SLUGS)
    assert all(f"observed: {found.observed}\n" in report + "\n" for found in ordered[-1].outcomes)


def test_a_bad_upstream_is_one_line(tmp_path, capsys):
    (tmp_path / "not-a-tarball.tar.gz").write_text("no")
    for upstream in (tmp_path / "absent", tmp_path, tmp_path / "not-a-tarball.tar.gz"):
        assert cli.main(["--upstream", str(upstream), "--out", str(tmp_path / "out")]) == 2
        error = capsys.readouterr().err
        assert error.startswith("upstream-bugs: error: ") and error.count("\n") == 1
    assert not (tmp_path / "out").exists()
