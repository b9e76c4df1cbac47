"""Produce the upstream pull request in a diffusers checkout: the rewrite, its checks, and the drafts a person submits.

    python utils/upstream_pr.py DIFFUSERS_CHECKOUT --check-json FILE --exactness-json FILE --branch URL [--inherit]
                                [--gpu-json FILE] [--issue N]

Plans both layouts on the checkout as it is (run it on a pristine one: the diff sizes are counted against it), writes
the chosen one (`tileblend rewrite`, or `tileblend rewrite --inherit`), runs `tileblend.upstream.copies` in check mode
and `ruff check` / `ruff format --check` (with the checkout's own pyproject.toml) on the touched files, then prints two
drafts from `drafts/` with this run's numbers filled in: the coordination issue to open first and, with
--issue (its number, once a maintainer has acknowledged it) and --gpu-json (a GPU run: its tests and timings are what
the PR is for), the pull request description and the benchmark script it asks maintainers to rerun
(`tileblend/upstream/tiled_vae_benchmark.py`). --check-json (written by `make upstream-check`
for the same layout) gives the check's table and test counts, --exactness-json (`make exact-vs-simple`) the exact vs
simple blend table of the coordination issue, --branch the pushed branch holding the same change, which the
drafts link; without any of them it refuses before writing anything. --gpu-json
(`out/gpu-check/summary.json`, written by `make gpu-check` on a CUDA machine) gives the GPU section. Exits non-zero
when a step fails. The templates are `tileblend/upstream/drafts/*.md` and the scripts the drafts embed
`tileblend/upstream/scripts/*.py`, both in the installed package.

The rewrite owns the text of its copies (it writes the source and every copy from one source in one step), so the
copy fixer is not run after it: any copy the checker reports (one of the rewrite's, or a copy of the checkout that had
drifted before) stops the run with exit 1, and nothing is fixed behind the rewrite's back.
"""

import argparse
import difflib
import json
import string
import subprocess
import sys
from pathlib import Path

from . import copies
from .change_digest import planned_change
from .check import MUTATIONS, CheckResult, table
from .edits import LINE_LENGTH
from .model_files import FileKind
from .rewrite import TreeRewrite, apply_rewrite, plan_rewrite, report
from .source_files import SourceError
from .test_cases import TOO_LARGE
from .test_text import ARITHMETIC_CLASS, TEST_CLASS_SUFFIX


DRAFTS = Path(__file__).resolve().parent / "drafts"
"""The templates of the drafts (`$`-placeholders, `string.Template`), one Markdown file each."""
BENCHMARK_SCRIPT = Path(__file__).with_name("tiled_vae_benchmark.py")
SCRIPTS = Path(__file__).resolve().parent / "scripts"
"""The scripts the drafts carry whole, so that a maintainer reruns their numbers: aten ops and blend calls
(`count_blend_ops.py`), the exact against the simple blend (`exact_vs_simple.py`)."""
GPU_NOT_RUN = "No GPU run is attached: the CUDA-graph tests skip without CUDA."

CUDA_NOT_RUN = " only; untested on CUDA"
# The JSON files the drafts need, and the command that writes each.
REQUIRED_JSON = {"--check-json": "make upstream-check", "--exactness-json": "make exact-vs-simple"}


def template(name: str) -> string.Template:
    """The template of the draft `name` ("coordination-issue" or "pr-description")."""
    return string.Template((DRAFTS / f"{name}.md").read_text(encoding="utf-8"))


def diff_size(rewrite: TreeRewrite) -> tuple[int, int]:
    """(lines added, lines removed) by the planned rewrite."""
    added = removed = 0
    for plan in rewrite.files:
        for line in difflib.unified_diff(plan.old.splitlines(), plan.new.splitlines(), lineterm="", n=0):
            added += line.startswith("+") and not line.startswith("+++")
            removed += line.startswith("-") and not line.startswith("---")
    return added, removed


def ruff(arguments: list[str], config: Path, files: list[str]) -> bool:
    options = ["--config", str(config)] if config.is_file() else ["--line-length", str(LINE_LENGTH)]
    result = subprocess.run([sys.executable, "-m", "ruff", *arguments, *options, *files])
    return result.returncode == 0


def rewrite_numbers(rewrite: TreeRewrite, sizes: dict[bool, tuple[int, int]], inherit: bool, clean: bool) -> dict:
    """The placeholders the rewrite itself fills: methods per kind and layout, files, both diff sizes, ruff."""
    methods = [method for plan in rewrite.files for method in plan.vectorized]
    copy_count = sum(len(plan.copies) for plan in rewrite.files)
    deleted = sum(len(plan.deleted) for plan in rewrite.files)
    if inherit:
        layout = (
            f"The {deleted} methods of classes that inherit `AutoencoderMixin` are deleted, so those classes use the "
            f"mixin's; the {copy_count} methods of the two classes that do not inherit it (`AutoencoderVidTok`, "
            "`LTX2VideoDiffusionDecoderModel`) become `# Copied from` copies of the mixin's."
        )
    else:
        layout = (
            f"Each of the {copy_count} loops is replaced in place by a full copy of the mixin's method under "
            "`# Copied from diffusers.models.autoencoders.vae.AutoencoderMixin.blend_X`, so `make fix-copies` keeps "
            "them in sync and every model file stays readable on its own; no imports change."
        )
    return {
        "diffusers_version": rewrite.version,
        "methods": len(methods),
        "files": sum(bool(plan.vectorized) for plan in rewrite.files if plan.kind is not FileKind.VAE),
        "blend_v": sum(method.method == "blend_v" for method in methods),
        "blend_h": sum(method.method == "blend_h" for method in methods),
        "blend_t": sum(method.method == "blend_t" for method in methods),
        "layout": layout,
        "copies_added": sizes[False][0],
        "copies_removed": sizes[False][1],
        "inherit_added": sizes[True][0],
        "inherit_removed": sizes[True][1],
        "added": sizes[inherit][0],
        "removed": sizes[inherit][1],
        "rewrite_command": "tileblend rewrite --inherit ." if inherit else "tileblend rewrite .",
        "layout_name": "inherit" if inherit else "copies",
        "ruff": "clean" if clean else "NOT clean",
    }


def check_numbers(check: CheckResult, inherit: bool) -> dict:
    """The placeholders `make upstream-check`'s result fills: its table, the added tests and their classes (and the
    classes with no test class, `TOO_LARGE`), and the sentences of evidence the drafts state from it.

    Raises ValueError for a result of the other layout, or without the broken-blend run.
    """
    if not check.broken:
        raise ValueError("the check JSON has no broken-blend runs: rerun `make upstream-check`")
    if check.inherit != inherit:
        layout = "--inherit" if check.inherit else "default"
        raise ValueError(f"the check JSON is of the {layout} layout: rerun `make upstream-check` for this one")
    added = list(check.added.values())
    passed, skipped = added.count("passed"), added.count("skipped")
    models = [name for name in check.added_classes if name != ARITHMETIC_CLASS]
    added_files = " ".join(sorted({test_id.split("::")[0] for test_id in check.added}))
    clean = all(results["rewritten"] for results in (check.copies, check.ruff_check, check.ruff_format))
    bugs = "; ".join(
        f"{name}: {run.count('failed')} of the {run.count('failed') + run.count('passed')} that run fail"
        for name, run in check.broken.items()
    )
    broken_result = f"Each of these deliberate bugs in `vae.py` and every copy makes an added test fail: {bugs}."
    evidence = (
        f"On that branch, upstream's `check_copies.py`, `ruff check` and `ruff format --check` are "
        f"{'clean' if clean else 'NOT clean'}, and `{check.test_command}` shows {len(check.regressions)} regressions "
        "against main. New tests run "
        f"the tiled forward of each tested model ({len(models)}) against a subclass whose blends are the row loop, and "
        f"`AutoencoderMixin.blend_v/h/t` against the loop in four dtypes, at zero tolerance: {passed} pass on a CPU, "
        f"{skipped} (half precision and CUDA graphs) skip without an accelerator. {broken_result}"
    )
    change = check.change
    return {
        "check_change": f"diffusers {change['version']}, this change in the {change['layout']} layout "
        f"({change['files']} files, SHA-256 {change['digest'][:16]})",
        "check_table": table(check),
        "tested_classes": ", ".join(
            f"`{name.removeprefix('Test').removesuffix(TEST_CLASS_SUFFIX)}`" for name in models
        ),
        "tested_class_count": len(models),
        "too_large": " and ".join(f"`{name}`" for name in TOO_LARGE),
        "added_passed": passed,
        "added_skipped": skipped,
        "added_seconds": f"{check.added_alone.seconds:.0f}",
        "test_command": check.test_command,
        "regressions": len(check.regressions),
        "check_evidence": evidence,
        "broken_result": broken_result,
        "added_test_commands": added_test_commands(added_files, check.broken),
    }


def added_test_commands(added_files: str, bugs) -> str:
    """The shell lines that run the added tests, then each deliberate bug `bugs` names (`check.MUTATIONS`) on its
    own: the `sed` edit of the autoencoder modules, the tests, and `git checkout` putting the modules back."""
    modules = "src/diffusers/models/autoencoders"
    lines = [f'    TESTS="{added_files}"', "    OMP_NUM_THREADS=1 pytest $TESTS -k TilingBlend"]
    for name in bugs:
        pattern, replacement = MUTATIONS[name]
        edit = f"sed -i -E 's|{pattern.pattern}|{replacement}|' {modules}/*.py"
        lines.append(f"    {edit} && OMP_NUM_THREADS=1 pytest $TESTS -k TilingBlend; git checkout -- {modules}")
    return "\n".join(lines)


PR_STEPS = ("upstream-tests", "pr-benchmark")
"""The steps of `make gpu-check UPSTREAM=...` that run this pull request's own tests and benchmark on the device."""


def gpu_ready(summary: dict, change: dict) -> str | None:
    """Why `summary` (`make gpu-check`'s summary.json) cannot back the PR description of `change`
    (`planned_change`), or None when it can: a run on CUDA whose `PR_STEPS` passed on this very change."""
    statuses = {step["name"]: step["status"] for step in summary["steps"]}
    if summary["device"] != "cuda":
        return f"it ran on {summary['device']}, not on CUDA"
    failed = [
        f"{name}: {statuses.get(name, 'not run')}" for name in PR_STEPS if not statuses.get(name, "").startswith("ok")
    ]
    if failed:
        return "; ".join(failed)
    ran = summary["pr"]["change"]
    if (ran["layout"], ran["digest"]) != (change["layout"], change["digest"]):
        return (
            f"it ran on another change (diffusers {ran['version']}, {ran['layout']} layout): rerun it with "
            "UPSTREAM= this checkout and the same layout"
        )
    return None


def gpu_numbers(summary: dict | None, change: dict) -> dict:
    """The GPU section of the PR from `make gpu-check`'s summary.json (the change that ran, the added tests on the
    device, and the benchmark script with main's diffusers and with the branch's), the sentences the drafts say of
    it, and `gpu_why`: why the run does not back the PR of `change` (`gpu_ready`), None when it does."""
    why = "there is none" if summary is None else gpu_ready(summary, change)
    untested = {"untested_devices": "CUDA GPUs, MPS, XPU or NPU", "gpu_why": why}
    if summary is None:
        return {"gpu_results": GPU_NOT_RUN, "gpu_status": GPU_NOT_RUN, "cuda_exactness": CUDA_NOT_RUN} | untested
    if why is not None:
        status = f"The GPU run so far does not back the PR: {why}."
        return {"gpu_results": GPU_NOT_RUN, "gpu_status": status, "cuda_exactness": CUDA_NOT_RUN} | untested
    machine, pr = summary["machine"], summary["pr"]
    change, benchmark = pr["change"], pr["benchmark"]
    status = (
        f"On CUDA ({machine['name']}, `make gpu-check`), the added tests pass and the benchmark script gives "
        "identical outputs with main's diffusers and with the branch's."
    )
    lines = [
        f"On {machine['name']} (torch {machine['torch']}, CUDA {machine['cuda']}), diffusers {change['version']} with "
        f"this change in the {change['layout']} layout ({change['files']} files, SHA-256 {change['digest'][:16]}):",
        "",
        f"- The added tests on CUDA: `{pr['tests']['command']}`: {pr['tests']['pytest']}.",
        f"- `benchmark_tiled_vae.py` on a saved {benchmark['weights']} at {benchmark['size']} in {benchmark['dtype']},"
        " with main's diffusers and with this branch's:",
        "",
        *[f"      main:   {line}" for line in benchmark["runs"]["main"]],
        *[f"      branch: {line}" for line in benchmark["runs"]["branch"]],
        *[f"      --compare: {line}" for line in benchmark["compare"]],
    ]
    tested = {"untested_devices": "MPS, XPU or NPU", "gpu_why": None}
    return {"gpu_results": "\n".join(lines), "gpu_status": status, "cuda_exactness": " and on CUDA"} | tested


def exactness_numbers(exactness: dict) -> dict:
    """The exact vs simple blend table of the coordination issue, from `make exact-vs-simple`'s JSON: its SD rows,
    which `exact_vs_simple.py` reruns in minutes, the largest difference among them (`simple_difference`, which the
    PR's notes quote), and the scripts the issue carries."""
    from .simple_blend import table as exactness_table

    rows = [result for result in exactness["results"] if result["workload"].startswith("SD v1 VAE")]
    if not rows:
        raise ValueError("it has no SD v1 VAE rows")
    worst = max(rows, key=lambda result: result["changed_share"])
    return {
        "exactness_table": exactness_table(rows),
        "simple_difference": f"{100 * worst['changed_share']:.1f}% of the output values, by up to "
        f"{worst['max_abs_difference']:.3g} ({worst['workload']}, {worst['dtype']})",
        "count_ops_script": (SCRIPTS / "count_blend_ops.py").read_text(encoding="utf-8"),
        "exactness_script": (SCRIPTS / "exact_vs_simple.py").read_text(encoding="utf-8"),
    }


def untested_classes(rewrite: TreeRewrite, check: CheckResult) -> str:
    """The sentences naming the rewritten classes without a tiling-parity test class, and why their methods are still
    covered."""
    methods = [method for plan in rewrite.files for method in plan.vectorized]
    tested = {name.removeprefix("Test").removesuffix(TEST_CLASS_SUFFIX) for name in check.added_classes}
    untested = sorted({method.cls for method in methods} - tested - set(TOO_LARGE))
    sentences = []
    if untested:
        names = ", ".join(f"`{name}`" for name in untested)
        sentences.append(f"Rewritten classes without a test file, so without a tiling-parity class: {names}.")
    large = sorted({method.cls for method in methods} & set(TOO_LARGE))
    if large:
        names = ", ".join(f"`{name}`" for name in large)
        sentences.append(
            f"{names} have test files but no tiling-parity class: their tester configs make one tiled forward take "
            "tens of seconds on a CPU."
        )
    covered = "Their methods are the tested ones: copies checked by `utils/check_copies.py`, or inherited from the "
    covered += "mixin, and `AutoencoderMixin`'s own are checked against the row loop by "
    covered += "`test_models_autoencoder_mixin_blend.py`."
    return " ".join([*sentences, covered]) if sentences else ""


def read_json(path: Path | None) -> dict | None:
    """The JSON object in the file at `path`, or None without a path."""
    return json.loads(path.read_text(encoding="utf-8")) if path else None


def read_check(path: Path) -> CheckResult:
    """The `CheckResult` of `make upstream-check` in the file at `path`."""
    return CheckResult.from_json(path.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="the pristine diffusers checkout to rewrite (in place)")
    parser.add_argument("--inherit", action="store_true", help="write the `tileblend rewrite --inherit` layout")
    parser.add_argument("--check-json", type=Path, help="the JSON written by `make upstream-check`")
    parser.add_argument("--exactness-json", type=Path, help="the JSON written by `make exact-vs-simple`")
    parser.add_argument("--gpu-json", type=Path, help="out/gpu-check/summary.json of `make gpu-check` on CUDA")
    parser.add_argument("--issue", type=int, help="the coordination issue's number: also print the PR description")
    parser.add_argument(
        "--branch",
        help="the https URL of the branch holding this change (a rewritten copy of this checkout, pushed), which the "
        "drafts link so that maintainers rerun their numbers on it",
    )
    args = parser.parse_args(argv)
    if not (args.branch or "").startswith("https://"):
        print(
            f"upstream-pr: error: --branch {args.branch or ''}: the drafts link the branch that holds this change; "
            "rewrite a copy of this checkout (`tileblend rewrite [--inherit] COPY`), push it and pass its https URL",
            file=sys.stderr,
        )
        return 2
    # Every JSON file is read before anything is written: a missing, stale or malformed one stops the run here.
    for flag, command in REQUIRED_JSON.items():
        path = getattr(args, flag.removeprefix("--").replace("-", "_"))
        if path is None or not path.is_file():
            print(f"upstream-pr: error: {flag} {path or ''}: no such file; `{command}` writes it", file=sys.stderr)
            return 2
    try:
        check = read_check(args.check_json)
        filled = check_numbers(check, args.inherit)
    except (OSError, ValueError) as error:
        print(f"upstream-pr: error: {error}", file=sys.stderr)
        return 2
    try:
        plans = {inherit: plan_rewrite(args.checkout, inherit=inherit) for inherit in (False, True)}
    except (SourceError, OSError, ValueError) as error:
        print(f"upstream-pr: error: {error}", file=sys.stderr)
        return 2
    rewrite = plans[args.inherit]
    change = planned_change(rewrite, args.inherit)
    if (check.change.get("layout"), check.change.get("digest")) != (change["layout"], change["digest"]):
        print(
            f"upstream-pr: error: the check JSON is of another change (diffusers {check.change.get('version')}, "
            f"{check.change.get('layout')} layout): rerun `make upstream-check` on this checkout",
            file=sys.stderr,
        )
        return 2
    for flag, path, numbers in (
        ("--gpu-json", args.gpu_json, lambda summary: gpu_numbers(summary, change)),
        ("--exactness-json", args.exactness_json, exactness_numbers),
    ):
        try:
            filled |= numbers(read_json(path))
        except (OSError, ValueError, LookupError, TypeError, AttributeError) as error:
            print(
                f"upstream-pr: error: {flag} {path} is not a JSON file of the expected form ({error!r})",
                file=sys.stderr,
            )
            return 2
    if args.issue is not None and filled["gpu_why"] is not None:
        print(
            "upstream-pr: error: the PR description needs a `make gpu-check UPSTREAM=...` run on CUDA whose "
            f"upstream-tests and pr-benchmark steps pass on this change: {filled['gpu_why']}",
            file=sys.stderr,
        )
        return 2
    try:
        apply_rewrite(rewrite)
    except (SourceError, OSError, ValueError) as error:
        print(f"upstream-pr: error: {error}", file=sys.stderr)
        return 2
    print(report(rewrite))
    if copies.main(["--path", str(args.checkout)]) != 0:
        return 1
    touched = [str(plan.path) for plan in rewrite.files if plan.changed]
    config = args.checkout / "pyproject.toml"
    clean = ruff(["check"], config, touched) and ruff(["format", "--check"], config, touched)

    sizes = {inherit: diff_size(plan) for inherit, plan in plans.items()}
    numbers = rewrite_numbers(rewrite, sizes, args.inherit, clean) | filled
    numbers["untested_classes"] = untested_classes(rewrite, check)
    numbers["issue"] = args.issue
    numbers["branch"] = args.branch
    numbers["benchmark_script"] = BENCHMARK_SCRIPT.read_text(encoding="utf-8")
    print(f"\nruff check / ruff format --check on {len(touched)} touched files: {numbers['ruff']}")
    print("\n---- DRAFT 1: the coordination issue (open it first; wait for a maintainer's acknowledgment) ----\n")
    print(template("coordination-issue").substitute(numbers))
    if args.issue is None:
        print(
            "---- The PR description and its benchmark script follow with --issue N (ISSUE=N), N the issue's number. ----"
        )
    else:
        print("---- DRAFT 2: the pull request description (after the acknowledgment) ----\n")
        print(template("pr-description").substitute(numbers))
    print(
        "---- These are drafts. Read every sentence, rerun what they report, and change or delete anything you cannot "
        "answer for before submitting. ----"
    )
    return 0 if clean and check.ok else 1


if __name__ == "__main__":
    sys.exit(main())
