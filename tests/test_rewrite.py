"""`tileblend rewrite` on a copy of the installed diffusers: what it reports, writes, refuses, and how the result runs.

The installed package is copied once per module (as `src/diffusers` of a checkout with `tests/models/autoencoders/`
and diffusers' ruff settings in its pyproject.toml); tests that need their own tree hard-link that copy, which is safe
because the rewrite and the copy checker replace files instead of writing into them.
"""

import ast
import contextlib
import filecmp
import importlib.util
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import diffusers
import pytest
import torch

from tileblend.cli import main as tileblend
from tileblend.compare import bitwise_equal
from tileblend.models import REGISTRY
from tileblend.patch import is_enabled
from tileblend.recognize import blend_candidates, recognize
from tileblend.upstream_tests import TEST_MODULE_PATH


REPO = Path(__file__).resolve().parents[1]
INSTALLED = Path(diffusers.__file__).parent
AUTOENCODERS = Path("models", "autoencoders")
# diffusers' ruff settings (line length, rule selection, isort), written here for the temp checkout.
RUFF_CONFIG = """\
[tool.ruff]
line-length = 119

[tool.ruff.lint]
select = ["C", "E", "F", "I", "W"]
ignore = ["C901", "E501", "E721", "E741", "F402", "F823"]

[tool.ruff.lint.isort]
lines-after-imports = 2
known-first-party = ["diffusers"]

[tool.ruff.format]
quote-style = "double"
indent-style = "space"
skip-magic-trailing-comma = false
line-ending = "auto"
"""


def load_check_copies():
    spec = importlib.util.spec_from_file_location("check_copies", REPO / "utils" / "check_copies.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_copies = load_check_copies()


def loop_blends(package: Path) -> dict[str, int]:
    """Recognised loop blends per autoencoder file of `package`, counted independently of the rewriter."""
    counts = {}
    for path in sorted((package / AUTOENCODERS).glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "def blend_" not in text:
            continue
        tree = ast.parse(text)
        found = sum(recognize(function) is not None for _, function in blend_candidates(tree))
        if found:
            counts[path.name] = found
    return counts


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*.py"))}


def link_tree(source: Path, destination: Path) -> Path:
    shutil.copytree(source, destination, copy_function=os.link)
    return destination


def replace_text(path: Path, text: str) -> None:
    """Write `path` as a new file (the tree may share its old inode with other trees)."""
    path.unlink()
    path.write_text(text, encoding="utf-8")


def run_rewrite(capsys, *args) -> tuple[int, str, str]:
    code = tileblend(["rewrite", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A checkout holding an untouched copy of the installed diffusers (never modified by the tests)."""
    root = tmp_path_factory.mktemp("pristine")
    shutil.copytree(INSTALLED, root / "src" / "diffusers", ignore=shutil.ignore_patterns("__pycache__"))
    (root / TEST_MODULE_PATH).parent.mkdir(parents=True)
    (root / "pyproject.toml").write_text(RUFF_CONFIG)
    return root


@pytest.fixture(scope="module")
def expected(pristine) -> dict[str, int]:
    """Loop blends per file of the pristine copy."""
    return loop_blends(pristine / "src" / "diffusers")


@pytest.fixture(scope="module")
def rewritten(pristine, tmp_path_factory) -> tuple[Path, str]:
    """(checkout root, printed report) after one `tileblend rewrite` of a copy of `pristine`."""
    root = link_tree(pristine, tmp_path_factory.mktemp("rewritten") / "checkout")
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        assert tileblend(["rewrite", str(root)]) == 0
    return root, output.getvalue()


def test_rewrite_reports_every_loop_blend_and_skips_nothing(rewritten, expected):
    root, out = rewritten
    if diffusers.__version__ == "0.42.1":
        assert (sum(expected.values()), len(expected)) == (44, 19)
    total = sum(expected.values())
    assert f"{total} blend methods in {len(expected)} files ({total} rewritten, 0 up to date), 0 skipped" in out
    assert "skipped (named like a blend" not in out
    for name in expected:
        assert f"models/autoencoders/{name}: rewritten: " in out
    assert "models/autoencoders/vae.py: blend_tiles and AutoencoderMixin.blend_v/h/t: written" in out
    assert loop_blends(root / "src" / "diffusers") == {}
    assert (root / TEST_MODULE_PATH).is_file()


def test_check_and_diff_write_nothing_and_second_run_changes_nothing(pristine, expected, tmp_path, capsys):
    root = link_tree(pristine, tmp_path / "checkout")
    before = snapshot(root)
    code, out, _ = run_rewrite(capsys, root, "--check")
    assert code == 1
    code, out, _ = run_rewrite(capsys, root, "--diff")
    assert code == 0
    assert "--- a/src/diffusers/models/autoencoders/autoencoder_kl.py\n" in out  # relative: `git apply` works
    assert "+    # Copied from diffusers.models.autoencoders.vae.AutoencoderMixin.blend_v\n" in out
    assert "+def blend_tiles(a: torch.Tensor, b: torch.Tensor, blend_extent: int, dim: int) -> torch.Tensor:\n" in out
    assert snapshot(root) == before
    assert not (root / TEST_MODULE_PATH).exists()

    assert run_rewrite(capsys, root)[0] == 0
    after = snapshot(root)
    assert after != before
    code, out, _ = run_rewrite(capsys, root)
    assert code == 0
    total = sum(expected.values())
    assert f"(0 rewritten, {total} up to date)" in out
    assert "0 files changed" in out
    assert snapshot(root) == after
    assert run_rewrite(capsys, root, "--check")[0] == 0


def test_bare_package_directory(pristine, expected, tmp_path, capsys):
    package = link_tree(pristine / "src" / "diffusers", tmp_path / "diffusers")
    code, out, _ = run_rewrite(capsys, package)
    assert code == 0
    assert f"{sum(expected.values())} blend methods in {len(expected)} files" in out
    assert "test module" not in out
    assert check_copies.main(["--path", str(package)]) == 0


def test_rewritten_tree_is_ruff_clean(pristine, expected, rewritten):
    root, _ = rewritten
    touched = [
        str(path)
        for path in sorted((root / "src" / "diffusers" / AUTOENCODERS).glob("*.py"))
        if not filecmp.cmp(path, pristine / "src" / "diffusers" / AUTOENCODERS / path.name, shallow=False)
    ]
    assert len(touched) == len(expected) + 1  # + vae.py
    touched.append(str(root / TEST_MODULE_PATH))
    config = ["--config", str(root / "pyproject.toml")]
    for command in (["check", "--no-cache"], ["format", "--check", "--no-cache"]):
        result = subprocess.run([sys.executable, "-m", "ruff", *command, *config, *touched], capture_output=True)
        assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


def test_copy_checker_passes_detects_fixes_and_refuses(rewritten, tmp_path, capsys):
    root = link_tree(rewritten[0], tmp_path / "checkout")
    assert check_copies.main(["--path", str(root)]) == 0

    wan = root / "src" / "diffusers" / AUTOENCODERS / "autoencoder_kl_wan.py"
    original = wan.read_bytes()
    replace_text(wan, original.decode().replace("dim=-2)", "dim=-1)", 1))
    capsys.readouterr()
    assert check_copies.main(["--path", str(root)]) == 1
    assert f"{wan}:" in capsys.readouterr().out
    assert check_copies.main(["--path", str(root), "--fix_and_overwrite"]) == 0
    assert wan.read_bytes() == original

    # A module function copied into a class: diffusers' fixer would overwrite the rest of the class.
    kl = root / "src" / "diffusers" / AUTOENCODERS / "autoencoder_kl.py"
    text = kl.read_text()
    marker = "    # Copied from diffusers.models.autoencoders.vae.AutoencoderMixin.blend_v\n"
    replace_text(kl, text.replace(marker, "    # Copied from diffusers.models.autoencoders.vae.blend_tiles\n"))
    before = snapshot(root)
    assert check_copies.main(["--path", str(root), "--fix_and_overwrite"]) == 2
    assert "depth 0, its copy at depth 1" in capsys.readouterr().err
    assert snapshot(root) == before


def test_rewritten_tree_runs_bitwise_like_the_pristine_one(rewritten, tmp_path):
    root, _ = rewritten
    out = tmp_path / "rewritten.pt"
    environment = {**os.environ, "PYTHONPATH": str(root / "src"), "OMP_NUM_THREADS": "1"}
    script = REPO / "tests" / "rewrite_tiled_outputs.py"
    subprocess.run([sys.executable, str(script), str(out)], env=environment, check=True, cwd=tmp_path)
    after = torch.load(out)
    assert not is_enabled()
    spec = importlib.util.spec_from_file_location("rewrite_tiled_outputs", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    before = module.tiled_outputs()

    assert Path(after["diffusers_file"]).is_relative_to(root)
    assert Path(before["diffusers_file"]).is_relative_to(INSTALLED)
    cases = sorted(key for key in before if key != "diffusers_file")
    assert cases == sorted(key for key in after if key != "diffusers_file")
    assert len({case.split("/")[0] for case in cases}) == len(REGISTRY)  # every model, 4D, 5D and blend_t
    for case in cases:
        assert after[case]["rewritten"] and not before[case]["rewritten"], case
        assert after[case]["calls"] == before[case]["calls"], case
        assert after[case]["calls"].get("blend_v", 0) > 0 and after[case]["calls"].get("blend_h", 0) > 0, case
        assert bitwise_equal(after[case]["output"], before[case]["output"]), case
    assert sum(after[case]["calls"].get("blend_t", 0) for case in cases) > 0


def test_emitted_test_module_passes(rewritten):
    root, _ = rewritten
    environment = {**os.environ, "PYTHONPATH": str(root / "src"), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(TEST_MODULE_PATH)],
        env=environment,
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


def test_error_not_a_diffusers_tree(tmp_path, capsys):
    code, out, err = run_rewrite(capsys, tmp_path)
    assert code == 2
    assert err.count("\n") == 1 and "is not a diffusers checkout" in err
    assert list(tmp_path.iterdir()) == []


def test_error_unparsable_file_writes_nothing(pristine, tmp_path, capsys):
    root = link_tree(pristine, tmp_path / "checkout")
    broken = root / "src" / "diffusers" / AUTOENCODERS / "autoencoder_kl_wan.py"
    replace_text(broken, broken.read_text() + "\ndef broken(:\n")
    before = snapshot(root)
    code, _, err = run_rewrite(capsys, root)
    assert code == 2
    assert err.count("\n") == 1 and f"cannot parse {broken}" in err
    assert snapshot(root) == before


def test_error_read_only_file_writes_nothing(pristine, tmp_path, capsys):
    root = link_tree(pristine, tmp_path / "checkout")
    locked = root / "src" / "diffusers" / AUTOENCODERS / "autoencoder_kl_wan.py"
    replace_text(locked, locked.read_text())
    locked.chmod(0o444)
    before = snapshot(root)
    code, _, err = run_rewrite(capsys, root)
    assert code == 2
    assert err.count("\n") == 1 and f"cannot write {locked}" in err
    assert snapshot(root) == before
