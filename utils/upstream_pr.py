"""Produce the upstream pull request in a diffusers checkout: rewrite, fix copies, ruff, then the PR description.

    python utils/upstream_pr.py DIFFUSERS_CHECKOUT

Runs `tileblend rewrite`, `utils/check_copies.py --fix_and_overwrite` and `ruff check` / `ruff format --check` (with
the checkout's own pyproject.toml) on the touched files, prints a summary, then the PR description of
docs/upstream-pr.md with this run's numbers filled in. Exits non-zero when a step fails.
"""

import difflib
import re
import string
import subprocess
import sys
from pathlib import Path

import check_copies

from tileblend.rewrite import apply_rewrite, diffusers_tree, plan_rewrite, report
from tileblend.source_files import SourceError


DOCS = Path(__file__).resolve().parents[1] / "docs" / "upstream-pr.md"
DESCRIPTION = re.compile(r"<!-- pr-description -->\n(.*?)<!-- /pr-description -->", re.DOTALL)


def changed_lines(checkout: Path, plans) -> tuple[int, int]:
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


def main(checkout: Path) -> int:
    try:
        package, _ = diffusers_tree(checkout)
        plans = plan_rewrite(checkout)
        apply_rewrite(plans)
    except (SourceError, OSError) as error:
        print(f"upstream-pr: error: {error}", file=sys.stderr)
        return 2
    print(report(plans, package))
    if check_copies.main(["--path", str(checkout), "--fix_and_overwrite"]) != 0:
        return 1
    touched = [str(plan.path) for plan in plans if plan.rewritten or plan.up_to_date or plan.path.stem == "vae"]
    touched += [str(plan.path) for plan in plans if plan.path.name.startswith("test_")]
    config = checkout / "pyproject.toml"
    clean = ruff(["check"], config, touched) and ruff(["format", "--check"], config, touched)

    copies = [plan for plan in plans if plan.rewritten or plan.up_to_date]
    added, removed = changed_lines(checkout, plans)
    version = re.search(r'__version__ = "([^"]+)"', (package / "__init__.py").read_text())
    numbers = {
        "diffusers_version": version.group(1) if version else "unknown",
        "methods": sum(len(plan.rewritten) + len(plan.up_to_date) for plan in copies),
        "files": len(copies),
        "blend_v": sum(name.endswith(".blend_v") for plan in copies for name in plan.rewritten + plan.up_to_date),
        "blend_h": sum(name.endswith(".blend_h") for plan in copies for name in plan.rewritten + plan.up_to_date),
        "blend_t": sum(name.endswith(".blend_t") for plan in copies for name in plan.rewritten + plan.up_to_date),
        "added": added,
        "removed": removed,
        "ruff": "clean" if clean else "NOT clean",
    }
    print(f"\nruff check / ruff format --check on {len(touched)} touched files: {numbers['ruff']}")
    print("\n---- PR description ----\n")
    print(string.Template(DESCRIPTION.search(DOCS.read_text()).group(1)).safe_substitute(numbers))
    return 0 if clean else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
