"""Reproduce the upstream bugs in diffusers' tiled paths and write their issue drafts (`make upstream-bugs`).

    python utils/upstream_bugs.py [--upstream DIFFUSERS] [--out DIR]

Runs each bug's repro script (`tileblend.upstream.bugs.scripts`) against the installed diffusers and, with
--upstream, against DIFFUSERS (a checkout, or a `.tar.gz` of one, extracted to a temporary folder; nothing in it is
written). Prints, per diffusers and bug, "reproduced", "not reproduced" or "error", with the observed and expected
lines. Writes into DIR (default out/upstream-bugs) one issue draft per bug reproduced on the last diffusers run (the
--upstream one when given), `<slug>.md`, and deletes the draft of any bug it did not reproduce there.

Exit status: 0 when every bug reproduced on every diffusers run; 1 otherwise, or when the scripts could not run
(one line says why); 2 on a usage error (DIFFUSERS is not a diffusers checkout or a readable tarball of one), before
any work.
"""

import argparse
import sys
import tempfile
from pathlib import Path

from ..check import UsageError, extract
from ..rewrite import RewriteError, diffusers_tree
from .catalog import BUGS
from .drafts import draft
from .run import REPRODUCED, Run, RunError, run_bugs


DEFAULT_OUT = Path("out/upstream-bugs")


def report(run: Run) -> str:
    """The lines `make upstream-bugs` prints for `run`: a heading, then per bug its verdict, observed and expected."""
    lines = [f"{run.target}: diffusers {run.system['diffusers']} ({run.system['diffusers_file']})"]
    for outcome in run.outcomes:
        lines += [
            f"  {outcome.verdict:<15} {outcome.bug.slug}",
            f"  {'':<15} observed: {outcome.observed}",
            f"  {'':<15} expected: {outcome.expected}",
        ]
    return "\n".join(lines)


def write_drafts(runs: list[Run], out: Path) -> list[Path]:
    """Write the draft of each bug the last of `runs` reproduced into `out` and delete the others' drafts; return
    the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for index, outcome in enumerate(runs[-1].outcomes):
        path = out / f"{outcome.bug.slug}.md"
        if outcome.verdict != REPRODUCED:
            path.unlink(missing_ok=True)
            continue
        reproducing = [runs[-1]] + [run for run in runs[:-1] if run.outcomes[index].verdict == REPRODUCED]
        path.write_text(draft(outcome, reproducing), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", type=Path, help="a diffusers checkout, or a .tar.gz of one")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the drafts' folder (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    if args.out.exists() and not args.out.is_dir():
        print(f"upstream-bugs: error: --out {args.out} is not a folder", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="upstream-bugs-") as work:
        try:
            packages = [("installed", None)]
            if args.upstream is not None:
                if not args.upstream.exists():
                    raise UsageError(f"{args.upstream} does not exist")
                checkout = args.upstream if args.upstream.is_dir() else extract(args.upstream, Path(work))
                packages.append((str(args.upstream), diffusers_tree(checkout)[0]))
        except (UsageError, RewriteError) as error:
            print(f"upstream-bugs: error: {error}", file=sys.stderr)
            return 2
        try:
            runs = run_bugs(BUGS, packages)
        except RunError as error:
            print(f"upstream-bugs: error: {error}", file=sys.stderr)
            return 1
    print("\n\n".join(report(run) for run in runs))
    written = write_drafts(runs, args.out)
    print(f"\n{len(written)} issue drafts in {args.out}/: {', '.join(path.name for path in written) or 'none'}")
    return 0 if all(outcome.verdict == REPRODUCED for run in runs for outcome in run.outcomes) else 1
