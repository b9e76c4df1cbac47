"""`make upstream-check` on upstream main (the snapshot `make upstream-snapshot` writes): the rewrite judged by
upstream's own check_copies.py, ruff and autoencoder tests, with the tests it adds in upstream's tester-mixin layout.

The snapshot is extracted to a temporary directory at test time. Without it the tests skip, except where
TILEBLEND_REQUIRE_SNAPSHOT=1, where they fail: CI must run them (tests/conftest.py). The whole check of one layout
(two copies' autoencoder tests in parallel, then the added tests against a broken blend) is one test, so that
`pytest -n 2` runs it in one worker only.
"""

import ast
import difflib
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from tileblend.upstream import check as upstream_check
from tileblend.upstream.edits import LINE_LENGTH
from tileblend.upstream.model_files import FileKind
from tileblend.upstream.rewrite import apply_rewrite, plan_rewrite
from tileblend.upstream.test_cases import CASES, TOO_LARGE
from tileblend.upstream.test_files import TESTING_UTILS
from tileblend.upstream.test_text import (
    ARITHMETIC_CLASS,
    ARITHMETIC_MODULE,
    MIXIN,
    MIXIN_NAME,
    REFERENCE,
    TEST_CLASS_SUFFIX,
)
from tileblend.upstream.test_text import test_class as render_test_class


pytestmark = pytest.mark.slow  # starts processes: not in the fast tier (`-m 'not slow'`)


REPO = Path(__file__).resolve().parents[1]
# Rewritten classes of upstream main without a test file upstream: their copies are covered by check_copies.py.
WITHOUT_TEST_FILE = {
    "AutoencoderKLFlux2",
    "AutoencoderKLHunyuanImage",
    "AutoencoderKLHunyuanImageRefiner",
    "AutoencoderKLHunyuanVideo15",
    "AutoencoderKLQwenImage",
}


@pytest.fixture(scope="module")
def checkout(upstream_snapshot, tmp_path_factory) -> Path:
    """An extracted, untouched copy of the snapshot (never modified by the tests)."""
    work = tmp_path_factory.mktemp("snapshot")
    with tarfile.open(upstream_snapshot) as archive:
        archive.extractall(work, filter="data")
    return work / "diffusers"


# `make upstream-check`'s selection without four upstream tests that take 95% of its time on a CPU and test no blend
# this PR changes bitwise (measured on 2 cores: 630 s, 360 s, 210 s, 100 s of 1385 s): LTX2's diffusion decoder
# tiled with splits (its blend methods are copies of the mixin's, checked by check_copies.py), its SwiGLU
# token tiling (no blend), and VidTok's 128-channel slicing/tiling tests (inputs smaller than a tile: no blend).
CI_EXCLUDED = (
    "test_tiled_decode_with_splits or test_token_tiled_swiglu_matches_untiled or TestAutoencoderVidTokSlicingTiling"
)


@pytest.mark.parametrize("inherit", [False, True], ids=["copies", "inherit"])
def test_upstream_check_on_the_snapshot(checkout, tmp_path, inherit, capsys):
    """One test per layout, so that `pytest -n 2` runs each expensive check once, in one worker."""
    selection = f"({upstream_check.SELECTION}) and not ({CI_EXCLUDED})"
    result = upstream_check.check(checkout, tmp_path, broken_blend=True, selection=selection, inherit=inherit)
    # Each step is said as it starts (the test runs take minutes).
    steps = re.findall(r"^upstream-check \[(\d)/6, \d+ s\]: ", capsys.readouterr().err, flags=re.MULTILINE)
    assert steps == ["1", "2", "3", "4", "5", "6"]

    # Upstream's own tools are clean on the rewritten copy.
    assert result.copies == {"pristine": True, "rewritten": True}
    assert result.ruff_check["rewritten"] and result.ruff_format["rewritten"]
    assert any(path.endswith("models/autoencoders/vae.py") for path in result.touched)
    assert str(TESTING_UTILS) in result.touched
    # The change it judged is named (version, layout, fingerprint), so that `make upstream-pr` pastes it only for the
    # same rewrite.
    assert result.change["layout"] == ("inherit" if inherit else "copies") and result.change["files"] == 32
    assert len(result.change["digest"]) == 64
    vectorized = "5 rewritten, 37 deleted" if inherit else "42 rewritten, 0 deleted"
    assert f"42 blend methods in 18 files ({vectorized}, 0 up to date), 0 skipped" in result.rewrite_report

    # No upstream test regresses.
    pristine, rewritten = result.tests["pristine"], result.tests["rewritten"]
    assert pristine.count("passed") > 20  # the selection really ran on both copies
    assert result.regressions == []
    # Optional dependencies missing here (datasets for oobleck, ...) break collection on both copies alike.
    assert set(rewritten.collection_errors) == set(pristine.collection_errors)
    assert result.ok
    assert "| passing on pristine, not on rewritten | - | 0 |" in upstream_check.table(result)

    # The added tests run for every rewritten class with an upstream test file and a tester config small enough, and
    # for the mixin's methods themselves; on a CPU the float32 ones pass and the others skip.
    classes = {name.removeprefix("Test").removesuffix(TEST_CLASS_SUFFIX) for name in result.added_classes}
    assert classes == set(CASES) | {ARITHMETIC_CLASS.removeprefix("Test").removesuffix(TEST_CLASS_SUFFIX)}
    assert len(CASES) == 11
    models = [test_id for test_id in result.added if test_id.endswith("test_tiling_matches_row_loop[fp32]")]
    assert len(models) == 11 and {result.added[test_id] for test_id in models} == {"passed"}
    arithmetic = [test_id for test_id in result.added if ARITHMETIC_CLASS in test_id]
    assert len(arithmetic) == 24 and {result.added[test_id] for test_id in arithmetic} == {"passed"}
    skipped = [i for i in result.added if ARITHMETIC_CLASS not in i and ("cuda_graph" in i or "16]" in i)]
    assert len(skipped) == 33 and {result.added[test_id] for test_id in skipped} == {"skipped"}  # no accelerator
    # Run again alone for their wall time (the two runs above share the cores), with the same outcomes.
    assert result.added_alone.outcomes == result.added

    # With each bug made in the vectorized blend of a copy (the simple form's weights among them), added tests fail:
    # every one for a bug that changes float32 results, the mixin's test in the dtypes it changes for the others.
    assert list(result.broken) == list(upstream_check.MUTATIONS)
    failed = {
        name: {i for i, outcome in run.outcomes.items() if outcome == "failed"} for name, run in result.broken.items()
    }
    ran = {i for i, outcome in result.added.items() if outcome == "passed"}
    assert failed["one row fewer blended"] == ran
    assert failed["float32 `1 - y / n`"] == {i for i in ran if not i.endswith("float64]")}
    in_dtypes = failed["weights and products in the tile's dtype"]
    assert in_dtypes == {i for i in arithmetic if i.endswith("16]")}  # float16 and bfloat16
    assert failed["float32 weights for float64 tiles"] == {i for i in arithmetic if i.endswith("float64]")}
    assert result.broken_ok


def test_added_tests_patch_nothing():
    """No `setattr`, monkeypatch, mock or hook in the added test code: the row loop runs in a plain subclass of the
    model."""
    texts = [
        MIXIN,
        REFERENCE,
        ARITHMETIC_MODULE,
        *(render_test_class(model, f"{model}TesterConfig", case) for model, case in CASES.items()),
    ]
    for text in texts:
        calls = {ast.unparse(node.func) for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Call)}
        assert not {"setattr", "delattr"} & calls, text
        assert not any("hook" in call or "mock" in call or "monkeypatch" in call for call in calls), text
        assert "monkeypatch" not in text and "mock" not in text


def test_added_test_text_fits_upstreams_line_length():
    """ruff format does not wrap comments and upstream's ruff does not enforce E501: the generated text must."""
    texts = [
        MIXIN,
        REFERENCE,
        ARITHMETIC_MODULE,
        *(render_test_class(model, f"{model}TesterConfig", case) for model, case in CASES.items()),
    ]
    long = [line for text in texts for line in text.splitlines() if len(line) > LINE_LENGTH]
    assert long == []


def test_edits_of_upstream_files_are_minimal_and_idempotent(checkout, tmp_path):
    root = tmp_path / "diffusers"
    shutil.copytree(checkout, root)
    plans = plan_rewrite(root).files
    tests = [plan for plan in plans if plan.kind is FileKind.TESTS]
    assert len(tests) == 13  # testing_utils.py, one file per tested class, the mixin's own test module
    rewritten = {method.cls for plan in plans for method in plan.vectorized}
    tested = {cls for cls in rewritten if any(f"class Test{cls}{TEST_CLASS_SUFFIX}(" in plan.new for plan in tests)}
    assert rewritten - tested == WITHOUT_TEST_FILE | set(TOO_LARGE)
    for plan in tests:
        removed = [
            line
            for line in difflib.unified_diff(plan.old.splitlines(), plan.new.splitlines(), lineterm="", n=0)
            if line.startswith("-") and not line.startswith("---")
        ]
        # Only additions, except the `from .testing_utils import ...` line that gains the mixin (and, in
        # testing_utils.py, the `from ...testing_utils import ...` line that gains `assert_tensors_close`).
        assert all(
            line.startswith(("-from .testing_utils import", "-from ...testing_utils import")) for line in removed
        ), (
            plan.path,
            removed,
        )
        ast.parse(plan.new)
    for plan in plans:
        plan.path.write_text(plan.new, encoding="utf-8")
    assert not any(plan.changed for plan in plan_rewrite(root).files)

    assert (root / TESTING_UTILS).read_text().count(f"class {MIXIN_NAME}:") == 1


def test_upstream_test_files_keep_their_bom_and_line_endings(checkout, tmp_path):
    """A Windows checkout: the test files the rewrite edits keep their BOM and CRLF, and the added lines take CRLF."""
    root = tmp_path / "diffusers"
    shutil.copytree(checkout, root)
    edited = [root / TESTING_UTILS, root / TESTING_UTILS.parent / "test_models_autoencoder_kl.py"]
    for path in edited:
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    apply_rewrite(plan_rewrite(root))
    for path in edited:
        data = path.read_bytes()
        assert data.startswith(b"\xef\xbb\xbf") and b"TilingBlend" in data, path
        assert data.count(b"\n") == data.count(b"\r\n"), path
    assert not any(plan.changed for plan in plan_rewrite(root).files)


def test_make_fix_copies_runs_the_checkouts_own_checker(checkout, tmp_path):
    """In a checkout, `make fix-copies DIFFUSERS=...` is upstream's own utils/check_copies.py (its message), which puts
    a copy that drifted from its source back; ours (utils/check_copies.py here) is for trees without utils/."""
    tree = tmp_path / "diffusers"
    shutil.copytree(checkout, tree, symlinks=True)
    kl = tree / "src" / "diffusers" / "models" / "autoencoders" / "autoencoder_kl.py"
    pristine = kl.read_bytes()
    kl.write_bytes(pristine.replace(b"processor = AttnAddedKVProcessor()", b"processor = None  # drifted", 1))
    assert kl.read_bytes() != pristine
    completed = subprocess.run(
        ["make", "--no-print-directory", "fix-copies", f"DIFFUSERS={tree}"], cwd=REPO, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert f"Detected changes, rewriting {Path('src/diffusers/models/autoencoders/autoencoder_kl.py')}." in (
        completed.stdout
    )
    assert kl.read_bytes() == pristine


def test_missing_checkout_is_a_usage_error(tmp_path, capsys):
    assert upstream_check.main([str(tmp_path / "absent")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_test_command_names_the_selection_or_the_whole_folder():
    """The command the table and the PR text show: `-k` with a selection, the bare folder for --full."""
    selected = upstream_check.CheckResult(selection=upstream_check.SELECTION)
    command = "pytest tests/models/autoencoders --continue-on-collection-errors"
    assert selected.test_command == f'{command} -k "tiling or slicing or blend"'
    assert upstream_check.CheckResult(selection=None).test_command == command


def tarball(path: Path, members: list[tuple[str, str | None]]) -> Path:
    """A .tar.gz at `path` of (name, text) files; a text of None makes a symbolic link named `name` to /etc/passwd."""
    import io

    with tarfile.open(path, "w:gz") as archive:
        for name, text in members:
            info = tarfile.TarInfo(name)
            if text is None:
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                archive.addfile(info)
            else:
                data = text.encode()
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize(
    "members, message",
    [
        (None, "cannot extract it"),
        ([("a/x.py", ""), ("b/y.py", "")], "expected one top-level folder, found 2 entries"),
        ([("diffusers/x.py", ""), ("../evil.py", "")], "cannot extract it"),
        ([("diffusers/x.py", ""), ("diffusers/link", None)], "cannot extract it"),
        ([("diffusers/README.md", "not diffusers")], "is not a diffusers checkout, or a .tar.gz of one"),
    ],
    ids=["not-a-tarball", "two-folders", "dot-dot-entry", "absolute-link", "not-diffusers"],
)
def test_unusable_tarballs_are_usage_errors_naming_the_users_file(tmp_path, capsys, members, message):
    path = tmp_path / "input.tar.gz"
    if members is None:
        path.write_text("not a tarball")
    else:
        tarball(path, members)
    assert upstream_check.main([str(path), "--work", str(tmp_path / "work")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"upstream-check: error: {path}" in err and message in err


def test_a_reused_work_directory_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "pristine").mkdir()
    assert upstream_check.main([str(tmp_path), "--work", str(tmp_path / "work")]) == 2
    assert "must be a new or empty directory" in capsys.readouterr().err


@pytest.mark.parametrize("kept", [0.90, 0.95, 0.97])
def test_a_truncated_archive_is_refused_before_extracting(tmp_path, capsys, kept):
    """An archive cut short (a download that stopped): one line naming it, exit 2, nothing extracted."""
    whole = tarball(tmp_path / "whole.tar.gz", [(f"diffusers/f{index}.py", "x = 1\n" * 2000) for index in range(40)])
    data = whole.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[: int(len(data) * kept)])
    work = tmp_path / "work"
    assert upstream_check.main([str(cut), "--work", str(work)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"upstream-check: error: {cut}: cannot extract it" in err
    assert not (work / "extracted").exists() or not any((work / "extracted").iterdir())


def test_an_archive_that_expands_too_much_is_refused_before_extracting(tmp_path, capsys):
    bomb = tarball(tmp_path / "bomb.tar.gz", [("diffusers/zeros.py", "\0" * (16 * 2**20))])
    assert upstream_check.main([str(bomb), "--work", str(tmp_path / "work")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bomb}: refused: it would expand to 16 MiB" in err
    assert not (tmp_path / "work" / "extracted").exists()


def test_work_inside_the_checkout_is_refused(tmp_path, capsys):
    assert upstream_check.main([str(tmp_path), "--work", str(tmp_path / "inside" / "work")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is inside the checkout; put it elsewhere" in err


def test_an_already_rewritten_checkout_is_refused_before_copying(checkout, tmp_path, capsys):
    root = tmp_path / "diffusers"
    shutil.copytree(checkout, root)
    apply_rewrite(plan_rewrite(root))
    work = tmp_path / "work"
    assert upstream_check.main([str(root), "--work", str(work)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing to rewrite (already rewritten?)" in err
    assert not (work / "pristine").exists()


def test_links_and_virtual_environments_of_a_checkout_are_not_followed_or_copied(checkout, tmp_path, monkeypatch):
    """A dangling link and a link to the checkout itself are copied as links; a .venv is not copied. (The test runs are
    stubbed: this is about the copies.)"""
    root = tmp_path / "diffusers"
    shutil.copytree(checkout, root)
    (root / "dangling").symlink_to(root / "no-such-file")
    (root / "self").symlink_to(root)
    (root / ".venv" / "lib").mkdir(parents=True)
    (root / ".venv" / "lib" / "big.bin").write_bytes(b"\0" * 1024)
    monkeypatch.setattr(
        upstream_check, "run_tests", lambda roots, *args, **kwargs: dict.fromkeys(roots, upstream_check.TestRun())
    )
    work = tmp_path / "work"
    work.mkdir()
    upstream_check.check(root, work)
    for copy in ("pristine", "rewritten"):
        assert (work / copy / "dangling").is_symlink() and (work / copy / "self").is_symlink()
        assert not (work / copy / ".venv").exists()
