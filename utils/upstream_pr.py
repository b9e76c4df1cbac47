"""Produce the upstream pull request in a diffusers checkout: rewrite, check copies, ruff, then the PR description.

    python utils/upstream_pr.py DIFFUSERS_CHECKOUT [--check-json FILE]

Runs `tileblend rewrite`, `utils/check_copies.py` in check mode and `ruff check` / `ruff format --check` (with the
checkout's own pyproject.toml) on the touched files, prints a summary, then the PR description of docs/upstream-pr.md
with this run's numbers filled in. With --check-json (written by `make upstream-check`, i.e.
`utils/upstream_check.py --json`) the description also gets that run's table and test counts; without it those
placeholders say that the check was not run. Exits non-zero when a step fails.

The rewrite owns the text of its copies (it writes the source and every copy from one source in one step), so the
copy fixer is not run after it: any copy the checker reports (one of the rewrite's, or a copy of the checkout that had
drifted before) stops the run with exit 1, and nothing is fixed behind the rewrite's back.
"""

import argparse
import difflib
import json
import re
import string
import subprocess
import sys
from pathlib import Path

import check_copies

from tileblend.rewrite import TreeRewrite, apply_rewrite, plan_rewrite, report
from tileblend.rewrite_plan import FileKind, FileRewrite
from tileblend.source_files import SourceError


DOCS = Path(__file__).resolve().parents[1] / "docs" / "upstream-pr.md"
DESCRIPTION = re.compile(r"<!-- pr-description -->\n(.*?)<!-- /pr-description -->", re.DOTALL)
NOT_RUN = "(not run: pass --check-json from `make upstream-check`)"


def changed_lines(checkout: Path, plans: list[FileRewrite]) -> tuple[int, int]:
    """(lines added, lines removed) by the rewrite: git's count in a git checkout, else difflib's."""
    numstat = subprocess.run(["git", "-C", str(checkout), "diff", "--numstat"], capture_output=True, text=True)
    if numstat.returncode == 0:
        counts = [line.split("\t")[:2] for line in numstat.stdout.splitlines()]
        created = sum(plan.new.count("\n") for plan in plans if not plan.old)
        return sum(int(added) for added, _ in counts) + created, sum(int(removed) for _, removed in counts)
    added = removed = 0
    for plan in plans:
        for line in difflib.unified_diff(plan.old.splitlines(), plan.new.splitlines(), lineterm="", n=0):
            added += line.startswith("+") and not line.startswith("+++")
            removed += line.startswith("-") and not line.startswith("---")
    return added, removed


def ruff(arguments: list[str], config: Path, files: list[str]) -> bool:
    options = ["--config", str(config)] if config.is_file() else ["--line-length", "119"]
    result = subprocess.run([sys.executable, "-m", "ruff", *arguments, *options, *files])
    return result.returncode == 0


def rewrite_numbers(rewrite: TreeRewrite, added: int, removed: int, clean: bool) -> dict:
    """The placeholders the rewrite itself fills: methods rewritten per kind, files, diff size, ruff."""
    copies = [plan for plan in rewrite.files if plan.copies]
    names = [name for plan in copies for name in plan.copies]
    return {
        "diffusers_version": rewrite.version,
        "methods": len(names),
        "files": len(copies),
        "blend_v": sum(name.endswith(".blend_v") for name in names),
        "blend_h": sum(name.endswith(".blend_h") for name in names),
        "blend_t": sum(name.endswith(".blend_t") for name in names),
        "added": added,
        "removed": removed,
        "ruff": "clean" if clean else "NOT clean",
    }


def check_numbers(check: dict | None) -> dict:
    """The placeholders `make upstream-check`'s JSON fills: its table, the added tests, their classes and times.

    Raises ValueError naming the missing key for a JSON without one (written by an older `make upstream-check`).
    """
    if check is None:
        keys = ("check_table", "tested_classes", "tested_class_count", "added_passed", "added_skipped")
        return dict.fromkeys(keys + ("rewritten_seconds", "pristine_seconds", "test_command", "regressions"), NOT_RUN)
    try:
        added = check["added"].values()
        return {
            "check_table": check["table"],
            "tested_classes": ", ".join(f"`{name}`" for name in check["added_classes"]),
            "tested_class_count": len(check["added_classes"]),
            "added_passed": sum(outcome == "passed" for outcome in added),
            "added_skipped": sum(outcome == "skipped" for outcome in added),
            "pristine_seconds": round(check["tests"]["pristine"]["seconds"]),
            "rewritten_seconds": round(check["tests"]["rewritten"]["seconds"]),
            "test_command": check["test_command"],
            "regressions": len(check["regressions"]),
        }
    except KeyError as error:
        raise ValueError(f"the check JSON has no {error}: rerun `make upstream-check`") from error


def description(numbers: dict) -> str:
    """The PR description of docs/upstream-pr.md with `numbers` filled in; unknown placeholders raise KeyError."""
    return string.Template(DESCRIPTION.search(DOCS.read_text()).group(1)).substitute(numbers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="the diffusers checkout to rewrite (in place)")
    parser.add_argument("--check-json", type=Path, help="the JSON written by `utils/upstream_check.py --json`")
    args = parser.parse_args(argv)
    try:
        check = json.loads(args.check_json.read_text()) if args.check_json else None
        check_filled = check_numbers(check)  # before anything is written: a stale JSON stops the run here
        rewrite = plan_rewrite(args.checkout)
        apply_rewrite(rewrite)
    except (SourceError, OSError, ValueError) as error:
        print(f"upstream-pr: error: {error}", file=sys.stderr)
        return 2
    print(report(rewrite))
    if check_copies.main(["--path", str(args.checkout)]) != 0:
        return 1
    touched = [str(plan.path) for plan in rewrite.files if plan.kind is not FileKind.MODULE or plan.copies]
    config = args.checkout / "pyproject.toml"
    clean = ruff(["check"], config, touched) and ruff(["format", "--check"], config, touched)

    added, removed = changed_lines(args.checkout, rewrite.files)
    numbers = rewrite_numbers(rewrite, added, removed, clean) | check_filled
    print(f"\nruff check / ruff format --check on {len(touched)} touched files: {numbers['ruff']}")
    print("\n---- PR description ----\n")
    print(description(numbers))
    return 0 if clean and (check is None or check["ok"]) else 1


if __name__ == "__main__":
    sys.exit(main())
