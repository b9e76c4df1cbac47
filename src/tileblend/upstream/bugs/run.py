"""Run the repro scripts against diffusers trees (the installed one, a checkout's) and judge each script.

All scripts of one diffusers run in one fresh process (`runner.py`, a file run by this interpreter with `PYTHONPATH`
set to the folder holding the checkout's package), so that diffusers is imported once; each script still runs as
`python -` runs it. The processes of the installed diffusers and of a checkout run at the same time. A script that
fails with its bug's signature reproduced the bug; one that exits cleanly did not; one that fails otherwise is an
error, whose last line is reported.
"""

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .catalog import Bug


RUNNER = Path(__file__).with_name("runner.py")

REPRODUCED, NOT_REPRODUCED, ERROR = "reproduced", "not reproduced", "error"


class RunError(Exception):
    """The scripts could not be run against the diffusers asked for; the message says why, in one line."""


@dataclass(frozen=True)
class Outcome:
    """What one bug's script did: its output (prints, then the traceback, if any) and whether it raised."""

    bug: Bug
    output: str
    failed: bool

    @property
    def verdict(self) -> str:
        """`REPRODUCED`, `NOT_REPRODUCED` or `ERROR`."""
        if not self.failed:
            return NOT_REPRODUCED
        return REPRODUCED if self.last_line.startswith(self.bug.signature) else ERROR

    @property
    def last_line(self) -> str:
        return self.output.strip().splitlines()[-1] if self.output.strip() else ""

    def line(self, word: str) -> str | None:
        """The script's `<word>: ...` line without the word, or None when it printed none."""
        prefix = f"{word}: "
        return next((line[len(prefix) :] for line in self.output.splitlines() if line.startswith(prefix)), None)

    @property
    def observed(self) -> str:
        """The `observed:` line, or the error the script stopped at before printing it."""
        return self.line("observed") or self.last_line

    @property
    def expected(self) -> str:
        return self.line("expected") or "(not printed)"


@dataclass(frozen=True)
class Run:
    """The outcomes of the scripts against one diffusers.

    Args:
        target: what was run against, for people ("installed", or the path given).
        system: the runner's `system` entry: the diffusers version, the `__init__.py` diffusers was imported from,
            and what `diffusers-cli env` reports (`env`).
        outcomes: one per bug, in the order asked.
    """

    target: str
    system: dict
    outcomes: tuple[Outcome, ...]


def run_bugs(bugs: tuple[Bug, ...], targets: list[tuple[str, Path | None]]) -> list[Run]:
    """Run the scripts of `bugs` against each target, `(name, package)`: the diffusers package folder `package`, or
    the installed diffusers for None. The targets' processes run at the same time; a run per target, in order.

    Raises:
        RunError: a runner process failed (its last line is the message), or diffusers was not imported from the
            target's `package`.
    """
    with tempfile.TemporaryDirectory(prefix="upstream-bugs-") as work:
        folder = Path(work)
        (folder / "scripts.json").write_text(json.dumps({bug.slug: bug.script for bug in bugs}), encoding="utf-8")
        processes = [start(folder / str(index), package) for index, (_, package) in enumerate(targets)]
        for process in processes:
            process.wait()
        return [finish(bugs, name, package, folder / str(index)) for index, (name, package) in enumerate(targets)]


def start(folder: Path, package: Path | None) -> subprocess.Popen:
    """Start the runner on `../scripts.json` in `folder`, which it creates, with its stderr into `folder/stderr`."""
    # One thread each: the runners of several targets share the cores; the scripts are too small to gain from more.
    environment = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
    if package is not None:
        environment["PYTHONPATH"] = str(package.parent)
    folder.mkdir()
    command = [sys.executable, str(RUNNER), str(folder.parent / "scripts.json"), str(folder / "results.json")]
    with open(folder / "stderr", "wb") as stderr:
        return subprocess.Popen(command, cwd=folder, env=environment, stdout=subprocess.DEVNULL, stderr=stderr)


def finish(bugs: tuple[Bug, ...], name: str, package: Path | None, folder: Path) -> Run:
    """The run of the finished runner of `folder`."""
    results_file = folder / "results.json"
    if not results_file.is_file():
        error = (folder / "stderr").read_text(errors="replace").strip().splitlines() or ["no output"]
        raise RunError(f"{name}: the repro scripts could not run: {error[-1]}")
    results = json.loads(results_file.read_text(encoding="utf-8"))
    system = results.pop("system")
    imported = Path(system["diffusers_file"]).parent
    if package is not None and imported.resolve() != package.resolve():
        raise RunError(f"{name}: diffusers was imported from {imported}, not from {package}")
    return Run(
        name, system, tuple(Outcome(bug, results[bug.slug]["output"], results[bug.slug]["failed"]) for bug in bugs)
    )
