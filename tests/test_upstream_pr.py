"""`tileblend.upstream.pr` (`make upstream-pr`): the PR description is filled from the run, never left with a
placeholder, and the rewrite it performs on a checkout is reported with its numbers."""

import dataclasses
import json
import re
import shutil
from pathlib import Path

import diffusers
import pytest
from test_rewrite import RUFF_CONFIG

from tileblend.upstream import check as upstream_check
from tileblend.upstream import pr as upstream_pr
from tileblend.upstream.model_files import FileKind, FileRewrite, MethodId
from tileblend.upstream.rewrite import TreeRewrite, plan_rewrite


pytestmark = pytest.mark.slow  # starts processes: not in the fast tier (`-m 'not slow'`)


REPO = Path(__file__).resolve().parents[1]
INSTALLED = Path(diffusers.__file__).parent


ADDED_TEST = "a::TestXTilingBlend::test_tiling_matches_row_loop[fp32]"
CHECK = upstream_check.CheckResult(
    selection=upstream_check.SELECTION,
    copies={"pristine": True, "rewritten": True},
    ruff_check={"pristine": True, "rewritten": True},
    ruff_format={"pristine": True, "rewritten": True},
    tests={"pristine": upstream_check.TestRun(), "rewritten": upstream_check.TestRun()},
    added={ADDED_TEST: "passed", "a::TestXTilingBlend::test_tiling_cuda_graph": "skipped"},
    added_alone=upstream_check.TestRun(seconds=61.4),
    broken={"one row fewer blended": upstream_check.TestRun(outcomes={ADDED_TEST: "failed"})},
    change={"version": "9.9.9", "layout": "copies", "files": 33, "digest": "d" * 64},
)
REWRITE = {
    "diffusers_version": "9.9.9",
    "methods": 7,
    "files": 3,
    "blend_v": 3,
    "blend_h": 3,
    "blend_t": 1,
    "layout": "LAYOUT SENTENCE.",
    "copies_added": 30,
    "copies_removed": 10,
    "inherit_added": 12,
    "inherit_removed": 20,
    "added": 30,
    "removed": 10,
    "rewrite_command": "tileblend rewrite .",
    "layout_name": "copies",
    "ruff": "clean",
    "untested_classes": "UNTESTED SENTENCE.",
}
CHANGE = {"layout": "copies", "digest": "d" * 64}
GPU = {
    "device": "cuda",
    "total_s": 301.2,
    "steps": [
        {"name": "verify", "status": "ok", "seconds": 40.4, "command": "python -m tileblend verify", "log": "x"},
        {"name": "upstream-tests", "status": "ok (28 passed)", "seconds": 20.0, "command": "pytest", "log": "y"},
        {"name": "pr-benchmark", "status": "ok (outputs identical)", "seconds": 30.0, "command": "b", "log": "z"},
    ],
    "machine": {"name": "NVIDIA H100", "torch": "2.11.0", "cuda": "13.0"},
    "pr": {
        "change": CHANGE | {"version": "9.9.9", "files": 33},
        "tests": {
            "command": "pytest tests/models/autoencoders/test_models_autoencoder_kl.py -k TilingBlend -rs",
            "pytest": "28 passed in 12.00s",
        },
        "benchmark": {
            "weights": "random-weight SD v1 VAE",
            "size": "1024x1024",
            "dtype": "float16",
            "runs": {
                "main": ["tiled encode: median 10.0 ms", "tiled decode: median 20.0 ms"],
                "branch": ["tiled encode: median 9.0 ms", "tiled decode: median 15.0 ms"],
            },
            "compare": ["latents: identical", "sample: identical"],
        },
    },
}


EXACTNESS = {
    "command": "python utils/exact_vs_simple.py --workloads sd",
    "results": [
        {
            "workload": "SD v1 VAE, WORKLOAD",
            "dtype": "float16",
            "max_abs_difference": 0.0039,
            "changed_share": 0.012,
            "values": 100,
            "decoder_dtype": "float16",
        },
        {
            "workload": "Wan 2.1 VAE, WORKLOAD",
            "dtype": "float16",
            "max_abs_difference": 0.0,
            "changed_share": 0.0,
            "values": 100,
            "decoder_dtype": "float32, cast",
        },
    ],
}


BRANCH = "https://github.com/someone/diffusers/tree/vectorize-tile-blends"


def drafts(numbers) -> tuple[str, str]:
    return tuple(upstream_pr.template(name).substitute(numbers) for name in ("coordination-issue", "pr-description"))


def filled(check=CHECK, gpu=None) -> dict:
    """Every placeholder: the rewrite's (REWRITE), then those of a check run, the exactness table and a GPU run."""
    numbers = REWRITE | upstream_pr.check_numbers(check, False) | upstream_pr.gpu_numbers(gpu, CHANGE)
    extra = {"issue": 123, "benchmark_script": "SCRIPT\n", "branch": BRANCH}
    return numbers | upstream_pr.exactness_numbers(EXACTNESS) | extra


def test_drafts_are_filled_from_the_check_run():
    issue, description = drafts(filled())
    for text in (issue, description):
        assert not re.search(r"\$(?!\(|TESTS\b)", text)  # every placeholder filled; `$(...)` and `$TESTS` are shell
    assert description.startswith("# Vectorize blend_v/blend_h/blend_t in autoencoders\n")
    assert upstream_check.table(CHECK) in description
    assert "replaces the 7 loops (3 `blend_v`, 3 `blend_h`, 1 `blend_t` in 3 files" in " ".join(description.split())
    assert "LAYOUT SENTENCE." in description
    assert "+30 -10 lines, tests included" in description and "+12 -20 lines" in description
    assert "1 passed, 1 skipped (half precision and CUDA graphs, without an accelerator),\n61 s when run alone" in (
        description
    )
    # The evidence sentences come from the run: the broken-blend result, and the issue's summary of the check.
    broken = "deliberate bugs in `vae.py` and every copy makes an added test fail: one row fewer blended: 1 of the 1 that run fail."
    assert broken in description and broken in " ".join(issue.split())
    assert "`check_copies.py`, `ruff check` and `ruff format --check` are clean" in issue
    assert "shows 0 regressions against main" in issue
    assert f"**The change.** {BRANCH}: the copies layout, on diffusers " in issue
    assert "The added tests, and each bug, one edit at a time, on the branch:" in issue and "    sed -i -E" in issue
    assert "the tiled forward of each tested model (1)" in " ".join(issue.split())
    # Without a GPU run, exactness on CUDA is not claimed.
    assert upstream_pr.CUDA_NOT_RUN in description and upstream_pr.CUDA_NOT_RUN in issue
    assert "(`X`)" in description and "Regressions: 0." in description
    assert "Coordination: #123." in description
    # Nothing for the submitter to fill in: no placeholder, no "not run", no ticked box.
    for text in (issue, description):
        text = re.sub(r"</?(details|summary)>", "", text.replace("<!--", "").replace("-->", ""))  # a collapsed block
        assert not re.search(r"<[A-Za-z][^>]*>|not run", text), text
    command = '    pytest tests/models/autoencoders --continue-on-collection-errors -k "tiling or slicing or blend"\n'
    assert command in description  # the flag the real run adds, shown
    # A draft a person submits: no review verdict, no words about how it was made, no kernel source cited.
    for text in (issue, description):
        for word in ("Verdict", "READY", "ready to merge", "round 1", "brief", "../shared", ".ai/", "Tick each"):
            assert word not in text, word
        assert "BinaryDivTrueKernel" not in text and "not a measurement" not in text
    # The notes for reviewers: the deliberate calls, with the measured difference of the simple blend; the issue has
    # none. No self-review section and no jargon a reviewer must look up.
    notes = description.split("## Notes for reviewers\n")[1].split("\n## ")[0]
    assert "1.2% of the output values, by up to 0.0039 (SD v1 VAE, WORKLOAD, float16)" in " ".join(notes.split())
    for call in ("The float64 branch", "`AutoencoderVidTok` and `LTX2VideoDiffusionDecoderModel`", "Not measured"):
        assert call in notes, call
    for text in (issue, description):
        assert "Self-review" not in text and "opmath" not in text
    assert "AI assistance" in description
    # Every number has the script that reruns it, whole, in a collapsed block; "not measured" is said once.
    for script in ("count_blend_ops.py", "exact_vs_simple.py"):
        text = (upstream_pr.SCRIPTS / script).read_text()
        assert f"<summary>{script}</summary>\n\n```python\n{text}```" in issue
    assert " ".join(issue.split()).count("Not measured.") == 1
    assert "[x]" not in description  # every box is the submitter's to tick
    # Nothing about CUDA is claimed without a GPU run; the issue asks which layout the maintainers prefer.
    assert upstream_pr.GPU_NOT_RUN in description and upstream_pr.GPU_NOT_RUN in issue
    assert "(+30 -10 lines, tests included)" in issue and "(+12 -20 lines, tests included)" in issue
    assert "Would you accept a PR along these lines, and which form and layout do you prefer?\n\n<details>" in issue
    assert "\nSupersedes #14722.\n" in issue and "withdrawn" not in issue
    # The added test files, from the check run, then each bug on its own: edit, tests, the modules put back.
    assert '    TESTS="a"\n    OMP_NUM_THREADS=1 pytest $TESTS -k TilingBlend\n    sed -i -E ' in description
    assert (
        "&& OMP_NUM_THREADS=1 pytest $TESTS -k TilingBlend; git checkout -- src/diffusers/models/autoencoders\n"
        in (description)
    )


@pytest.mark.skipif(shutil.which("sed") is None, reason="needs sed")
def test_each_deliberate_bug_is_a_sed_command_that_makes_it(tmp_path):
    """The description gives each bug of the check run as a `sed` line a maintainer reruns: applied to the mixin's
    methods, it makes the edit `make upstream-check` made."""
    import subprocess

    from tileblend.upstream.blend_methods import upstream_code

    _, description = drafts(filled())
    [line] = [line.strip() for line in description.splitlines() if line.strip().startswith("sed ")]
    command = line.split(" && ")[0]
    module = tmp_path / "src" / "diffusers" / "models" / "autoencoders" / "vae.py"
    module.parent.mkdir(parents=True)
    text = "".join(upstream_code().methods.values())
    module.write_text(text)
    subprocess.run(command, shell=True, cwd=tmp_path, check=True)
    pattern, replacement = upstream_check.MUTATIONS["one row fewer blended"]
    assert module.read_text() == pattern.sub(replacement, text) != text


def test_the_issue_puts_exact_vs_simple_with_the_measured_table():
    issue, _ = drafts(filled())
    assert "| SD v1 VAE, WORKLOAD | float16 | float16 | 0.0039 | 1.2% |" in issue
    assert "Wan 2.1 VAE" not in issue  # only the rows the script in the issue reruns in minutes
    assert "`python exact_vs_simple.py` (below) reruns these rows in 73 s on a 2-core CPU" in " ".join(issue.split())


def test_drafts_paste_a_gpu_run():
    issue, description = drafts(filled(gpu=GPU))
    assert (
        "On NVIDIA H100 (torch 2.11.0, CUDA 13.0), diffusers 9.9.9 with this change in the copies layout"
        in description
    )
    assert "(33 files, SHA-256 dddddddddddddddd)" in description and upstream_pr.GPU_NOT_RUN not in description
    assert (
        "`pytest tests/models/autoencoders/test_models_autoencoder_kl.py -k TilingBlend -rs`: 28 passed in"
        in description
    )
    assert "      main:   tiled decode: median 20.0 ms" in description
    assert "      branch: tiled decode: median 15.0 ms" in description
    assert "      --compare: sample: identical" in description
    assert "On CUDA (NVIDIA H100, `make gpu-check`), the added tests pass" in issue
    assert "(tested on a CPU and on CUDA, below)" in " ".join(description.split())
    assert "(tested on a CPU and on CUDA);" in " ".join(issue.split())


@pytest.mark.parametrize(
    "change, why",
    [
        ({"device": "cpu"}, "it ran on cpu, not on CUDA"),
        (
            {"steps": [GPU["steps"][1] | {"status": "FAIL (1 failed)"}, GPU["steps"][2]]},
            "upstream-tests: FAIL (1 failed)",
        ),
        ({"steps": GPU["steps"][:2]}, "pr-benchmark: not run"),
        (
            {"pr": GPU["pr"] | {"change": GPU["pr"]["change"] | {"digest": "e" * 64}}},
            "it ran on another change (diffusers 9.9.9, copies layout): rerun it with UPSTREAM= this checkout and the "
            "same layout",
        ),
    ],
    ids=["cpu-run", "added-tests-fail", "no-benchmark", "another-change"],
)
def test_only_a_cuda_run_of_this_changes_tests_and_benchmark_backs_the_description(change, why):
    assert upstream_pr.gpu_ready(GPU, CHANGE) is None
    assert upstream_pr.gpu_ready(GPU | change, CHANGE) == why
    issue, _ = drafts(filled(gpu=GPU | change))
    assert f"The GPU run so far does not back the PR: {why}." in " ".join(issue.split())
    assert "(tested on a CPU only; untested on CUDA);" in " ".join(issue.split())


def test_main_refuses_the_description_without_a_run_of_this_change(installed_checkout, tmp_path, capsys):
    """A CUDA run whose steps passed, but on another rewrite: refused, one line, nothing written."""
    vae = installed_checkout / "src" / "diffusers" / "models" / "autoencoders" / "vae.py"
    before = vae.read_bytes()
    gpu = tmp_path / "gpu.json"
    gpu.write_text(json.dumps(GPU))
    assert (
        upstream_pr.main(
            [
                str(installed_checkout),
                *required_json(tmp_path, installed_checkout),
                "--issue",
                "1",
                "--gpu-json",
                str(gpu),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "it ran on another change" in err
    assert vae.read_bytes() == before


def test_drafts_refuse_a_missing_number():
    numbers = filled()
    del numbers["methods"]
    with pytest.raises(KeyError, match="methods"):
        drafts(numbers)


def without(key: str) -> dict:
    return {name: value for name, value in json.loads(CHECK.to_json()).items() if name != key}


def test_the_check_result_reads_back_from_its_json():
    assert upstream_check.CheckResult.from_json(CHECK.to_json()) == CHECK
    # The derived values in the file are for a person reading it; the reader computes them again.
    assert upstream_check.CheckResult.from_json(json.dumps(without("table") | {"ok": False})) == CHECK


@pytest.mark.parametrize(
    "text, message",
    [
        (json.dumps(without("selection")), "the check JSON has no 'selection': rerun `make upstream-check`"),
        (CHECK.to_json().replace('"inherit": false', '"inherit": true'), "the check JSON is of the --inherit layout"),
        (json.dumps([without("table")]), "is not one `make upstream-check` writes"),
        (json.dumps(without("added") | {"added": ["a::b"]}), "is not one `make upstream-check` writes (added is"),
        (
            json.dumps(without("broken") | {"broken": {"x": {"outcome": {}}}}),
            "is not one `make upstream-check` writes",
        ),
        (CHECK.to_json()[:-10], "is not one `make upstream-check` writes"),
    ],
    ids=["stale", "other-layout", "a-list", "added-a-list", "broken-run-key", "truncated"],
)
def test_a_stale_or_mismatched_check_json_is_refused_before_anything_is_written(tmp_path, capsys, text, message):
    """A JSON from an older `make upstream-check`, of the other layout, or malformed: exit 2 naming why, the checkout
    untouched."""
    checkout = make_checkout(tmp_path / "diffusers")
    path = tmp_path / "upstream-check.json"
    path.write_text(text)
    vae = checkout / "src" / "diffusers" / "models" / "autoencoders" / "vae.py"
    before = vae.read_bytes()
    exactness = tmp_path / "exact-vs-simple.json"
    exactness.write_text(json.dumps(EXACTNESS))
    arguments = ["--check-json", str(path), "--exactness-json", str(exactness), "--branch", BRANCH]
    assert upstream_pr.main([str(checkout), *arguments]) == 2
    assert message in capsys.readouterr().err
    assert vae.read_bytes() == before


def required_json(tmp_path: Path, checkout: Path | None = None) -> list[str]:
    """The --check-json and --exactness-json arguments, with valid files in `tmp_path`: a check of the rewrite of
    `checkout` when given."""
    check, exactness = tmp_path / "check.json", tmp_path / "exact-vs-simple.json"
    change = CHECK.change if checkout is None else upstream_pr.planned_change(plan_rewrite(checkout), False)
    check.write_text(dataclasses.replace(CHECK, change=change).to_json())
    exactness.write_text(json.dumps(EXACTNESS))
    return ["--check-json", str(check), "--exactness-json", str(exactness), "--branch", BRANCH]


def test_a_malformed_gpu_or_exactness_json_is_refused_before_anything_is_written(tmp_path, capsys):
    checkout = make_checkout(tmp_path / "diffusers")
    vae = checkout / "src" / "diffusers" / "models" / "autoencoders" / "vae.py"
    before = vae.read_bytes()
    for flag, content in (("--gpu-json", {"device": "cuda"}), ("--exactness-json", [1, 2])):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(content))
        arguments = [*required_json(tmp_path, checkout), flag, str(path)]
        assert upstream_pr.main([str(checkout), *arguments]) == 2
        assert f"upstream-pr: error: {flag} {path} is not a JSON file of the expected form" in capsys.readouterr().err
    assert vae.read_bytes() == before


def test_the_pr_description_needs_a_gpu_run(tmp_path, capsys):
    checkout = make_checkout(tmp_path / "diffusers")
    vae = checkout / "src" / "diffusers" / "models" / "autoencoders" / "vae.py"
    before = vae.read_bytes()
    assert upstream_pr.main([str(checkout), *required_json(tmp_path, checkout), "--issue", "123"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a `make gpu-check UPSTREAM=...` run on CUDA" in err
    assert err.rstrip().endswith("there is none")
    assert vae.read_bytes() == before


@pytest.mark.parametrize("branch", [None, "github.com/someone/diffusers"])
def test_drafts_without_the_branch_they_link_are_refused(tmp_path, capsys, branch):
    """The drafts' numbers are rerun on the branch they link: without its https URL, one line, exit 2, nothing
    written."""
    checkout = make_checkout(tmp_path / "diffusers")
    vae = checkout / "src" / "diffusers" / "models" / "autoencoders" / "vae.py"
    before = vae.read_bytes()
    arguments = required_json(tmp_path)[:-2] + ([] if branch is None else ["--branch", branch])
    assert upstream_pr.main([str(checkout), *arguments]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--branch" in err and "push it and pass its https URL" in err
    assert vae.read_bytes() == before


@pytest.mark.parametrize("missing", ["--check-json", "--exactness-json"])
def test_drafts_without_a_check_or_exactness_run_are_refused(tmp_path, capsys, missing):
    """Without the JSON of `make upstream-check` or `make exact-vs-simple`: one line naming the command, exit 2, and
    nothing written."""
    checkout = make_checkout(tmp_path / "diffusers")
    vae = checkout / "src" / "diffusers" / "models" / "autoencoders" / "vae.py"
    before = vae.read_bytes()
    arguments = required_json(tmp_path)
    position = arguments.index(missing)
    del arguments[position : position + 2]
    assert upstream_pr.main([str(checkout), *arguments]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and upstream_pr.REQUIRED_JSON[missing] in err and missing in err
    assert vae.read_bytes() == before


def make_checkout(root: Path) -> Path:
    """A checkout at `root` holding a copy of the installed diffusers, without upstream's tester layout."""
    shutil.copytree(INSTALLED, root / "src" / "diffusers", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tests" / "models" / "autoencoders").mkdir(parents=True)
    (root / "pyproject.toml").write_text(RUFF_CONFIG)
    return root


@pytest.fixture(scope="module")
def installed_checkout(tmp_path_factory) -> Path:
    return make_checkout(tmp_path_factory.mktemp("checkout"))


def test_main_rewrites_and_prints_both_drafts(installed_checkout, tmp_path, capsys):
    # A GPU run of this very change: the fingerprint of the rewrite of this checkout.
    change = upstream_pr.planned_change(plan_rewrite(installed_checkout), False)
    gpu = tmp_path / "gpu.json"
    gpu.write_text(json.dumps(GPU | {"pr": GPU["pr"] | {"change": GPU["pr"]["change"] | change}}))
    arguments = [*required_json(tmp_path, installed_checkout), "--issue", "123", "--gpu-json", str(gpu)]
    assert upstream_pr.main([str(installed_checkout), *arguments]) == 0
    out = capsys.readouterr().out
    summary, rest = out.split("---- DRAFT 1: the coordination issue")
    issue, description = rest.split("---- DRAFT 2: the pull request description")
    methods = int(re.search(r"(\d+) blend methods in \d+ files", summary).group(1))
    assert methods >= 42
    assert f"This PR replaces the {methods} loops" in " ".join(description.split())
    assert f"diffusers\n{diffusers.__version__}" in description or f"diffusers {diffusers.__version__}" in description
    assert "`ruff format --check` on the touched files: clean" in description
    assert upstream_check.table(CHECK) in description and not re.search(r"\$(?!\(|TESTS\b)", description)
    # Both layouts were planned on the pristine checkout: their diff sizes differ and both are printed.
    copies, inherit = re.findall(r"\(\+(\d+) -(\d+) lines, tests included\)", issue)
    assert copies != inherit and int(copies[0]) > int(inherit[0])
    assert out.rstrip().endswith("before submitting. ----")
    # The benchmark script the description names is in it, whole, in a collapsed block.
    assert f"```python\n{upstream_pr.BENCHMARK_SCRIPT.read_text()}```\n\n</details>" in description
    # The check JSON tested class `X` only: every rewritten class is named as without a tiled-forward test.
    untested = re.search(r"Rewritten classes without a test file, so without a tiling-parity class: ([^.]*)\.", out)
    assert "`AutoencoderKL`" in untested.group(1).split(", ") and "`AutoencoderKLWan`" in untested.group(1)


def test_main_refuses_a_tree_that_is_not_diffusers(tmp_path, capsys):
    assert upstream_pr.main([str(tmp_path / "tree"), *required_json(tmp_path)]) == 2
    assert "is not a diffusers checkout" in capsys.readouterr().err


def test_main_checks_copies_and_fixes_none(tmp_path, capsys):
    """A copy that had drifted before the rewrite: the run reports it and fails, and leaves it as it was (the
    rewrite owns its copies; the copy fixer is not run behind it)."""
    root = make_checkout(tmp_path / "checkout")
    drifted = root / "src" / "diffusers" / "models" / "autoencoders" / "drifted.py"
    text = (
        "class Drifted:\n"
        "    # Copied from diffusers.models.autoencoders.vae.AutoencoderMixin.disable_tiling\n"
        "    def disable_tiling(self):\n"
        "        pass\n"
    )
    drifted.write_text(text)
    assert upstream_pr.main([str(root), *required_json(tmp_path, root)]) == 1
    out = capsys.readouterr().out
    assert f"{drifted}:2: copy differs from diffusers.models.autoencoders.vae.AutoencoderMixin.disable_tiling" in out
    assert "---- PR description ----" not in out
    assert drifted.read_text() == text


def test_untested_classes_name_the_classes_without_a_tiling_parity_class():
    """A class without a test file and one whose tester config is too large are named, each with why; a tested class
    is not."""
    methods = [("LTX2VideoDiffusionDecoderModel", "blend_t"), ("AutoencoderKLHunyuanVideo", "blend_t")]
    methods += [("AutoencoderKLHunyuanVideo15", "blend_t")]
    plan = FileRewrite(path=Path("m.py"), kind=FileKind.MODULE, old="", new="")
    plan.rewritten = [MethodId(cls, method) for cls, method in methods]
    rewrite = TreeRewrite(Path("diffusers"), None, "9.9.9", [plan])
    added = {"a::TestAutoencoderKLHunyuanVideoTilingBlend::test_x": "passed"}
    text = upstream_pr.untested_classes(rewrite, dataclasses.replace(CHECK, added=added))
    assert "without a test file, so without a tiling-parity class: `AutoencoderKLHunyuanVideo15`." in text
    assert "`LTX2VideoDiffusionDecoderModel` have test files but no tiling-parity class" in text
    assert "`AutoencoderKLHunyuanVideo`" not in text


def test_a_check_of_another_change_is_refused_before_anything_is_written(tmp_path, capsys):
    """The check JSON of another checkout or of an older main: one line, exit 2, the checkout untouched."""
    checkout = make_checkout(tmp_path / "diffusers")
    vae = checkout / "src" / "diffusers" / "models" / "autoencoders" / "vae.py"
    before = vae.read_bytes()
    assert upstream_pr.main([str(checkout), *required_json(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the check JSON is of another change (diffusers 9.9.9, copies layout)" in err
    assert vae.read_bytes() == before
