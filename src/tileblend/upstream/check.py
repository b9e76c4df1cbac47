"""Judge `tileblend rewrite` on a diffusers checkout with upstream's own tools, against the untouched checkout.

    python utils/upstream_check.py DIFFUSERS [--inherit] [--full | -k EXPR] [--broken-blend] [--work DIR] [--json FILE]

DIFFUSERS is a diffusers checkout or a `.tar.gz` of one. It is copied twice (pristine, rewritten) and the rewrite is
applied to one copy (`tileblend rewrite`, or `tileblend rewrite --inherit` with --inherit). Then, on both copies:
upstream's `utils/check_copies.py` (run inside the copy, with this interpreter's bin directory first on PATH because it
shells out to `ruff`), `ruff check` and `ruff format --check` with the copy's pyproject.toml on the files the rewrite
touches, and upstream's `tests/models/autoencoders` (only `-k "tiling or slicing or blend"` unless --full or another
-k; the two runs go in parallel, so their wall times are not reported), then the added tests alone on the rewritten
copy, timed. It prints one table: each check on pristine and rewritten, then the test ids that pass on pristine but not
on rewritten (regressions), the added tests, and the collection errors of both copies (a missing optional dependency,
reported and not fatal when both copies have it). With --broken-blend it then makes each bug of `MUTATIONS` in the
vectorized blend (`AutoencoderMixin.blend_v/h/t` and every copy of them) of its own copy of the rewritten tree, among
them the simple form's weights in the tile's dtype, and runs the added tests on each: every bug must make some of them
fail (those it changes the results of: the model tests run in float32 on a CPU, the blend test in every dtype).

Exit status: 0 when the rewritten copy is clean, regresses nothing and (with --broken-blend) some added test fails
with every bug; 1 otherwise; 2 on a usage error, before any work (DIFFUSERS is not a diffusers
checkout or a readable, complete tarball of one with a single top-level folder, would expand too much, is already
rewritten or holds --work; --work is not new; the rewrite cannot run there).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import types
import typing
import xml.etree.ElementTree as ElementTree
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from .. import arguments
from ..output import OutputError, writing
from .change_digest import planned_change
from .edits import RewriteError
from .rewrite import apply_rewrite, diffusers_tree, plan_rewrite, report
from .test_files import TESTS
from .test_text import TEST_CLASS_SUFFIX


SELECTION = "tiling or slicing or blend"
# The bugs the added tests must catch, each made in the vectorized blend methods of a copy of the
# rewritten tree (the mixin's and every copy; the loops index shapes from the front, `a.shape[2]`, and are not hit):
# name -> (pattern, replacement).
MUTATIONS = {
    "one row fewer blended": (
        re.compile(r"min\(a\.shape\[(-[123])\], b\.shape\[\1\], blend_extent\)"),
        r"min(a.shape[\1], b.shape[\1], blend_extent - 1)",
    ),
    "weights and products in the tile's dtype": (
        re.compile(r"weight_dtype = torch\.promote_types\(b\.dtype, torch\.float32\)"),
        "weight_dtype = b.dtype",
    ),
    "float32 weights for float64 tiles": (
        re.compile(r"weight_dtype = torch\.promote_types\(b\.dtype, torch\.float32\)"),
        "weight_dtype = torch.float32",
    ),
    "float32 `1 - y / n`": (
        re.compile(r"weight_a = 1 - weight_b if weight_dtype == torch\.float64 else \(n - [xy]\) / n"),
        "weight_a = 1 - weight_b",
    ),
}


@dataclass
class TestRun:
    """Outcome per test id ("path::Class::test[param]") of one pytest run, and its wall time."""

    outcomes: dict[str, str] = field(default_factory=dict)
    collection_errors: dict[str, str] = field(default_factory=dict)  # module -> first line of the error
    seconds: float = 0.0

    def count(self, outcome: str) -> int:
        return sum(value == outcome for value in self.outcomes.values())


@dataclass
class CheckResult:
    """Everything the table shows; `--json` writes it (`to_json`) for `tileblend.upstream.pr` to read (`from_json`)."""

    selection: str | None  # the -k expression of the test runs; None: all of tests/models/autoencoders
    inherit: bool = False  # the layout: copies everywhere (False) or inherited methods where possible (True)
    copies: dict[str, bool] = field(default_factory=dict)  # copy -> check_copies.py clean
    ruff_check: dict[str, bool] = field(default_factory=dict)
    ruff_format: dict[str, bool] = field(default_factory=dict)
    tests: dict[str, TestRun] = field(default_factory=dict)
    touched: list[str] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)
    added: dict[str, str] = field(default_factory=dict)  # added test id -> outcome on rewritten
    added_alone: TestRun | None = None  # the added tests run again alone on the rewritten copy, timed
    broken: dict[str, TestRun] = field(default_factory=dict)  # mutation (MUTATIONS) -> the added tests
    rewrite_report: str = ""
    change: dict = field(default_factory=dict)  # what the rewrite changed (`change_digest.planned_change`)

    @property
    def added_classes(self) -> list[str]:
        return sorted({test_id.split("::")[1] for test_id in self.added})

    @property
    def test_command(self) -> str:
        """The pytest command of the test runs, from the checkout's root."""
        command = f"pytest {TESTS.as_posix()} --continue-on-collection-errors"
        return f'{command} -k "{self.selection}"' if self.selection else command

    @property
    def broken_ok(self) -> bool | None:
        """Whether each bug of `MUTATIONS` made some added test fail (None when not run)."""
        if not self.broken:
            return None
        return all(run.count("failed") > 0 for run in self.broken.values())

    @property
    def ok(self) -> bool:
        rewritten_clean = self.copies["rewritten"] and self.ruff_check["rewritten"] and self.ruff_format["rewritten"]
        added_pass = bool(self.added) and all(value in ("passed", "skipped") for value in self.added.values())
        return rewritten_clean and not self.regressions and added_pass and self.broken_ok is not False

    def to_json(self) -> str:
        """The result as JSON: its fields, and for a person reading the file the values derived from them."""
        data = asdict(self) | {"added_classes": self.added_classes, "test_command": self.test_command}
        return json.dumps(data | {"ok": self.ok, "table": table(self)}, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "CheckResult":
        """The result `to_json` wrote; the derived values are computed again, not read.

        Raises:
            ValueError: `text` is not a JSON object holding every field with a value of the field's type.
        """
        try:
            data = json.loads(text)
            values = {entry.name: data[entry.name] for entry in fields(cls)}
            values["tests"] = {name: TestRun(**run) for name, run in values["tests"].items()}
            values["added_alone"] = None if values["added_alone"] is None else TestRun(**values["added_alone"])
            values["broken"] = {name: TestRun(**run) for name, run in values["broken"].items()}
        except KeyError as error:
            raise ValueError(f"the check JSON has no {error}: rerun `make upstream-check`") from error
        except (json.JSONDecodeError, AttributeError, TypeError) as error:
            raise ValueError(f"the check JSON is not one `make upstream-check` writes ({error})") from error
        for name, hint in typing.get_type_hints(cls).items():
            kind = hint if isinstance(hint, types.UnionType) else typing.get_origin(hint) or hint
            if not isinstance(values[name], kind):
                raise ValueError(f"the check JSON is not one `make upstream-check` writes ({name} is not a {hint})")
        return cls(**values)


class UsageError(Exception):
    """DIFFUSERS or --work cannot be used as given (exit 2); the message names what the user passed."""


# What a copy of a checkout leaves out: version control, caches and virtual environments (a `.venv` can be gigabytes).
COPY_IGNORE = shutil.ignore_patterns(".git", "__pycache__", ".venv", "venv", ".tox", ".nox", "*.egg-info")
# A .tar.gz of diffusers' src, utils and tests expands about 5x; past these, the archive is refused before extracting.
MAX_EXPANSION, MAX_EXTRACTED_BYTES = 50, 4 * 2**30


def extract(source: Path, work: Path) -> Path:
    """The checkout root: `source` itself, or where its `.tar.gz` extracts (a single top-level folder).

    Raises:
        UsageError: `source` is not a tarball, is cut short (read to its end before anything is extracted), would
            expand more than `MAX_EXPANSION` times or past `MAX_EXTRACTED_BYTES`, holds an entry that would land
            outside the extraction folder (`../`, an absolute link: tarfile's "data" filter), does not hold exactly one
            top-level folder, or what it holds is not a diffusers checkout; or the checkout holds `work`.
    """
    if source.is_dir():
        if work.resolve().is_relative_to(source.resolve()):
            raise UsageError(f"{source}: --work {work} is inside the checkout; put it elsewhere")
        root = source
    else:
        try:
            with tarfile.open(source) as archive:
                members = archive.getmembers()  # reads to the end: a truncated archive fails here
                size = sum(member.size for member in members)
                if size > MAX_EXTRACTED_BYTES or size > MAX_EXPANSION * source.stat().st_size:
                    raise UsageError(
                        f"{source}: refused: it would expand to {size / 2**20:.0f} MiB, "
                        f"{size / source.stat().st_size:.0f} times its size"
                    )
                archive.extractall(work / "extracted", members=members, filter="data")
        except tarfile.ReadError as error:
            raise UsageError(f"{source}: cannot extract it: not a readable tar archive") from error
        except EOFError as error:
            raise UsageError(f"{source}: cannot extract it: the archive is cut short") from error
        except (tarfile.TarError, OSError) as error:
            raise UsageError(f"{source}: cannot extract it: {str(error).splitlines()[0]}") from error
        entries = list((work / "extracted").iterdir())
        if len(entries) != 1 or not entries[0].is_dir():
            raise UsageError(f"{source}: expected one top-level folder, found {len(entries)} entries")
        root = entries[0]
    try:
        diffusers_tree(root)
    except RewriteError as error:
        raise UsageError(f"{source} is not a diffusers checkout, or a .tar.gz of one") from error
    return root


def environment(root: Path) -> dict[str, str]:
    """This interpreter's bin directory first on PATH (check_copies.py runs `ruff`), the copy's src importable."""
    bin_directory = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": bin_directory + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONPATH": str(root / "src"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def passes(command: list[str], root: Path) -> bool:
    return subprocess.run(command, cwd=root, env=environment(root), capture_output=True).returncode == 0


def ruff(arguments: list[str], root: Path, files: list[str]) -> bool:
    config = ["--config", str(root / "pyproject.toml")]
    return passes([sys.executable, "-m", "ruff", *arguments, "--no-cache", *config, *files], root)


def start_tests(root: Path, selection: str | None, report: Path, paths: list[str]) -> subprocess.Popen:
    """Start upstream's tests `paths` in `root` (in the background), writing a JUnit report."""
    command = [sys.executable, "-m", "pytest", *paths, "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    command += ["--continue-on-collection-errors", f"--junitxml={report}"]
    command += ["-k", selection] if selection else []
    env = {**environment(root), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def read_junit(report: Path, seconds: float) -> TestRun:
    """Outcomes by test id from a pytest JUnit report; collection errors are keyed by module."""
    run = TestRun(seconds=seconds)
    if not report.is_file():
        return run
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        children = {child.tag: child for child in case}
        if not classname:  # a module that failed to collect: keep the exception line ("E   ModuleNotFoundError...")
            error = children.get("error")
            text = (error.text or "") if error is not None else ""
            raised = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
            run.collection_errors[name] = raised[-1] if raised else "collection error"
            continue
        module, _, cls = classname.rpartition(".")
        if not cls.startswith("Test"):  # a test function at module level
            module, cls = classname, ""
        module_path = module.replace(".", "/") + ".py"
        test_id = "::".join(part for part in (module_path, cls, name) if part)
        if "failure" in children or "error" in children:
            run.outcomes[test_id] = "failed"
        elif "skipped" in children:
            run.outcomes[test_id] = "skipped"
        else:
            run.outcomes[test_id] = "passed"
    return run


def run_tests(
    roots: dict[str, Path], selection: str | None, work: Path, paths: list[str] = (str(TESTS),)
) -> dict[str, TestRun]:
    """Run the selected tests on every copy at once; outcomes per copy."""
    started = time.monotonic()
    processes = {name: start_tests(root, selection, work / f"{name}.xml", paths) for name, root in roots.items()}
    runs = {}
    for name, process in processes.items():
        process.wait()
        runs[name] = read_junit(work / f"{name}.xml", time.monotonic() - started)
    return runs


def mutate(root: Path, pattern: re.Pattern, replacement: str) -> int:
    """Make a bug of `MUTATIONS` in the vectorized blend methods of the tree at `root`; returns how many it changed."""
    changed = 0
    for module in sorted((root / "src" / "diffusers" / "models" / "autoencoders").glob("*.py")):
        text, count = pattern.subn(replacement, module.read_text(encoding="utf-8"))
        if count:
            module.write_text(text, encoding="utf-8")
            changed += count
    if not changed:
        raise RewriteError(f"{root}: no vectorized blend method to break ({pattern.pattern})")
    return changed


def check(
    source: Path,
    work: Path,
    full: bool = False,
    broken_blend: bool = False,
    selection: str = SELECTION,
    inherit: bool = False,
) -> CheckResult:
    """Copy, rewrite (with `inherit`: the `--inherit` layout) and judge `source` (see the module docstring); the copies
    stay under `work`.

    `selection` is the `-k` expression of the test runs (ignored with `full`). Says each step on stderr as it starts,
    with the time spent so far."""
    started = time.monotonic()
    steps = 6 if broken_blend else 5

    def step(number: int, what: str) -> None:
        elapsed = time.monotonic() - started
        print(f"upstream-check [{number}/{steps}, {elapsed:.0f} s]: {what}", file=sys.stderr, flush=True)

    checkout = extract(source, work)
    if not any(plan.changed for plan in plan_rewrite(checkout, inherit=inherit).files):
        raise UsageError(f"{source}: nothing to rewrite (already rewritten?): give a pristine checkout")
    step(1, f"copying {source} twice and rewriting one copy")
    roots = {"pristine": work / "pristine", "rewritten": work / "rewritten"}
    for root in roots.values():
        # Links are copied as links: a dangling one, or one to a folder above it, is not followed.
        shutil.copytree(checkout, root, symlinks=True, ignore=COPY_IGNORE)
    rewrite = plan_rewrite(roots["rewritten"], inherit=inherit)
    change = planned_change(rewrite, inherit)
    apply_rewrite(rewrite)
    result = CheckResult(selection=None if full else selection, inherit=inherit, change=change)
    result.rewrite_report = report(rewrite)
    result.touched = sorted(
        str(plan.path.relative_to(roots["rewritten"])) for plan in rewrite.files if plan.changed or plan.up_to_date
    )
    what = "all of" if full else f'-k "{selection}" of'
    step(2, f"{what} tests/models/autoencoders on both copies at once (the longest step: minutes on a CPU)")
    tests = run_tests(roots, None if full else selection, work)
    step(3, "check_copies.py, ruff check and ruff format --check on both copies")
    for name, root in roots.items():
        result.copies[name] = passes([sys.executable, "utils/check_copies.py"], root)
        files = [path for path in result.touched if (root / path).is_file()]
        result.ruff_check[name] = ruff(["check"], root, files)
        result.ruff_format[name] = ruff(["format", "--check"], root, files)
    result.tests = tests
    pristine, rewritten = tests["pristine"].outcomes, tests["rewritten"].outcomes
    result.regressions = sorted(
        test_id for test_id, outcome in pristine.items() if outcome == "passed" and rewritten.get(test_id) != "passed"
    )
    result.added = {
        test_id: outcome
        for test_id, outcome in sorted(rewritten.items())
        if test_id not in pristine and f"{TEST_CLASS_SUFFIX}::" in test_id
    }
    files = sorted({test_id.split("::")[0] for test_id in result.added})  # collect only these
    step(4, f"the {len(result.added)} added tests alone on the rewritten copy, timed")
    result.added_alone = run_tests({"alone": roots["rewritten"]}, TEST_CLASS_SUFFIX, work, files)["alone"]
    if broken_blend:
        step(5, f"the added tests on {len(MUTATIONS)} copies, each with one bug in the blend")
        mutants = {f"mutant-{index}": work / f"mutant-{index}" for index in range(len(MUTATIONS))}
        for mutant, (pattern, replacement) in zip(mutants.values(), MUTATIONS.values()):
            shutil.copytree(roots["rewritten"], mutant, symlinks=True)
            mutate(mutant, pattern, replacement)
        runs = run_tests(mutants, TEST_CLASS_SUFFIX, work, files)
        result.broken = dict(zip(MUTATIONS, runs.values()))
    step(steps, "done")
    return result


def table(result: CheckResult) -> str:
    """The result as the Markdown table `make upstream-check` prints and the PR description pastes."""

    def word(ok: bool) -> str:
        return "clean" if ok else "FAILS"

    def tests(run: TestRun) -> str:
        counts = f"{run.count('passed')} passed, {run.count('failed')} failed, {run.count('skipped')} skipped"
        return f"{counts}, {len(run.collection_errors)} collection errors"

    pristine, rewritten = result.tests["pristine"], result.tests["rewritten"]
    added = result.added.values()
    rows = [
        ("check", "pristine", "rewritten"),
        ("---", "---", "---"),
        ("`python utils/check_copies.py`", word(result.copies["pristine"]), word(result.copies["rewritten"])),
        (
            f"`ruff check` ({len(result.touched)} touched files)",
            word(result.ruff_check["pristine"]),
            word(result.ruff_check["rewritten"]),
        ),
        ("`ruff format --check`", word(result.ruff_format["pristine"]), word(result.ruff_format["rewritten"])),
        (f"`{result.test_command}`", tests(pristine), tests(rewritten)),
        (
            "added tests (`*TilingBlend`)",
            "-",
            f"{sum(value == 'passed' for value in added)} passed, {sum(value == 'failed' for value in added)} failed, "
            f"{sum(value == 'skipped' for value in added)} skipped in {len(result.added_classes)} classes; "
            f"{result.added_alone.seconds:.0f} s when run alone on one thread",
        ),
        ("passing on pristine, not on rewritten", "-", str(len(result.regressions))),
    ]
    for name, broken in result.broken.items():
        rows.append(
            (
                f"added tests, blend broken: {name}",
                "-",
                f"{broken.count('failed')} of {len(broken.outcomes)} fail"
                + ("" if broken.count("failed") else " (THE BUG IS MISSED)"),
            )
        )
    lines = [f"| {' | '.join(row)} |" for row in rows]
    notes = [f"regression: {test_id}" for test_id in result.regressions]
    errors = sorted(set(pristine.collection_errors) | set(rewritten.collection_errors))
    for module in errors:
        both = module in pristine.collection_errors and module in rewritten.collection_errors
        message = rewritten.collection_errors.get(module) or pristine.collection_errors[module]
        where = "both copies (not a regression)" if both else "ONE copy only"
        notes.append(f"collection error in {where}: {module}: {message}")
    return "\n".join(lines + [""] * bool(notes) + notes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("diffusers", type=Path, help="a diffusers checkout or a .tar.gz of one")
    parser.add_argument("--inherit", action="store_true", help="judge the `tileblend rewrite --inherit` layout")
    parser.add_argument("--full", action="store_true", help="run all of tests/models/autoencoders")
    parser.add_argument("-k", dest="selection", default=SELECTION, help=f'test selection (default "{SELECTION}")')
    parser.add_argument("--broken-blend", action="store_true", help="also check that the added tests catch a bug")
    parser.add_argument("--work", type=Path, help="keep the copies in this (new) directory")
    parser.add_argument("--json", type=arguments.output_file, help="also write the result as JSON to this file")
    args = parser.parse_args(argv)
    if not args.diffusers.exists():
        print(f"upstream-check: error: {args.diffusers} does not exist", file=sys.stderr)
        return 2
    if args.work is not None and args.work.exists() and (not args.work.is_dir() or any(args.work.iterdir())):
        print(f"upstream-check: error: --work {args.work} must be a new or empty directory", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="upstream-check-") as temporary:
        work = args.work or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        try:
            result = check(args.diffusers, work, args.full, args.broken_blend, args.selection, args.inherit)
        except (UsageError, RewriteError) as error:
            print(f"upstream-check: error: {error}", file=sys.stderr)
            return 2
    print(table(result))
    print(f"\nupstream-check: {'OK' if result.ok else 'FAILED'}")
    if args.json:
        try:
            with writing(args.json) as path:
                path.write_text(result.to_json(), encoding="utf-8")
        except OutputError as error:
            print(f"upstream-check: error: {error}", file=sys.stderr)
            return 2
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
