"""`tileblend rewrite` on a copy of the installed diffusers: what it reports, writes, refuses, and how the result runs.

The installed package is copied once per module (as `src/diffusers` of a checkout with `tests/models/autoencoders/`
and diffusers' ruff settings in its pyproject.toml); tests that need their own tree hard-link that copy, which is safe
because the rewrite and the copy checker replace files instead of writing into them.
"""

import ast
import contextlib
import filecmp
import io
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import diffusers
import pytest
import torch
from rewrite_tiled_outputs import tiled_outputs

from tileblend.cli import main as tileblend
from tileblend.compare import bitwise_equal
from tileblend.patch import is_enabled
from tileblend.recognize import blend_candidates, recognize
from tileblend.tiny_models import REGISTRY, missing_class
from tileblend.upstream import copies as check_copies
from tileblend.upstream.rewrite import apply_rewrite, plan_rewrite
from tileblend.upstream.source_files import SourceError
from tileblend.upstream.standalone_test import TEST_MODULE_PATH, render_test_module


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


def snapshot(directory: Path) -> dict[str, bytes | None]:
    """The bytes of each `.py` file under `directory`; None for one that is not a regular file (a FIFO)."""
    return {
        str(path.relative_to(directory)): path.read_bytes() if path.is_file() else None
        for path in sorted(directory.rglob("*.py"))
    }


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
    assert (
        f"{total} blend methods in {len(expected)} files ({total} rewritten, 0 deleted, 0 up to date), 0 skipped"
        in out
    )
    assert "skipped (named like a blend" not in out
    for name in expected:
        assert f"models/autoencoders/{name}: rewritten: " in out
    assert "models/autoencoders/vae.py: AutoencoderMixin.blend_v/h/t: written" in out
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
    assert "+    def blend_t(self, a: torch.Tensor, b: torch.Tensor, blend_extent: int) -> torch.Tensor:\n" in out
    assert snapshot(root) == before
    assert not (root / TEST_MODULE_PATH).exists()

    assert run_rewrite(capsys, root)[0] == 0
    after = snapshot(root)
    assert after != before
    code, out, _ = run_rewrite(capsys, root)
    assert code == 0
    total = sum(expected.values())
    assert f"(0 rewritten, 0 deleted, {total} up to date)" in out
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
    replace_text(wan, original.decode().replace("b.shape[-2], blend_extent)", "b.shape[-2], blend_extent + 1)", 1))
    capsys.readouterr()
    assert check_copies.main(["--path", str(root)]) == 1
    assert f"{wan}:" in capsys.readouterr().out
    assert check_copies.main(["--path", str(root), "--fix_and_overwrite"]) == 0
    assert wan.read_bytes() == original

    # A module function copied into a class: diffusers' fixer would overwrite the rest of the class.
    kl = root / "src" / "diffusers" / AUTOENCODERS / "autoencoder_kl.py"
    text = kl.read_text()
    marker = "    # Copied from diffusers.models.autoencoders.vae.AutoencoderMixin.blend_v\n"
    function = "diffusers.models.autoencoders.autoencoder_kl_hunyuan_video.prepare_causal_attention_mask"
    replace_text(kl, text.replace(marker, f"    # Copied from {function}\n"))
    before = snapshot(root)
    assert check_copies.main(["--path", str(root), "--fix_and_overwrite"]) == 2
    assert "depth 0, its copy at depth 1" in capsys.readouterr().err
    assert snapshot(root) == before


@pytest.mark.slow
def test_rewritten_tree_runs_bitwise_like_the_pristine_one(rewritten, tmp_path):
    root, _ = rewritten
    out = tmp_path / "rewritten.pt"
    environment = {**os.environ, "PYTHONPATH": str(root / "src"), "OMP_NUM_THREADS": "1"}
    script = REPO / "tests" / "rewrite_tiled_outputs.py"
    subprocess.run([sys.executable, str(script), str(out)], env=environment, check=True, cwd=tmp_path)
    after = torch.load(out)
    assert not is_enabled()
    before = tiled_outputs()

    assert Path(after["diffusers_file"]).is_relative_to(root)
    assert Path(before["diffusers_file"]).is_relative_to(INSTALLED)
    cases = sorted(key for key in before if key != "diffusers_file")
    assert cases == sorted(key for key in after if key != "diffusers_file")
    # every model of this diffusers release, 4D, 5D and blend_t
    assert len({case.split("/")[0] for case in cases}) == len(
        [entry for entry in REGISTRY if not missing_class(entry)]
    )
    for case in cases:
        assert after[case]["rewritten"] and not before[case]["rewritten"], case
        assert after[case]["calls"] == before[case]["calls"], case
        assert after[case]["calls"].get("blend_v", 0) > 0 and after[case]["calls"].get("blend_h", 0) > 0, case
        assert bitwise_equal(after[case]["output"], before[case]["output"]), case
    assert sum(after[case]["calls"].get("blend_t", 0) for case in cases) > 0


@pytest.mark.slow
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


def unparsable_module(root: Path) -> list[str]:
    path = root / "src" / "diffusers" / AUTOENCODERS / "autoencoder_kl_wan.py"
    replace_text(path, path.read_text() + "\ndef broken(:\n")
    return [f"cannot parse {path}"]


def read_only_module(root: Path) -> list[str]:
    path = root / "src" / "diffusers" / AUTOENCODERS / "autoencoder_kl_wan.py"
    replace_text(path, path.read_text())
    path.chmod(0o444)
    return [f"cannot write {path}"]


def undecodable_test_module(root: Path) -> list[str]:
    (root / TEST_MODULE_PATH).write_bytes(b"# caf\xe9\n")
    return [f"cannot read {root / TEST_MODULE_PATH}: "]


def fifo_module(root: Path) -> list[str]:
    """A FIFO named like a model module: a read would block forever."""
    path = root / "src" / "diffusers" / AUTOENCODERS / "autoencoder_kl_wan.py"
    path.unlink()
    os.mkfifo(path)
    return [f"cannot read {path}: {path} is not a regular file"]


def oversized_init(root: Path) -> list[str]:
    """A sparse `__init__.py` far larger than any module: the version is read within the same size bound."""
    path = root / "src" / "diffusers" / "__init__.py"
    path.unlink()
    with path.open("wb") as file:
        file.truncate(17 << 20)  # past the 16 MiB bound
    return [f"cannot read {path}: {path} is larger than"]


def no_autoencoder_mixin(root: Path) -> list[str]:
    vae = root / "src" / "diffusers" / AUTOENCODERS / "vae.py"
    replace_text(vae, vae.read_text().replace("class AutoencoderMixin", "class AutoencoderHelpers"))
    return [
        f"has no class AutoencoderMixin (diffusers {diffusers.__version__})",
        "tileblend rewrite supports diffusers 0.36.0 and later",
    ]


@pytest.mark.parametrize(
    "breakage",
    [unparsable_module, read_only_module, undecodable_test_module, fifo_module, oversized_init, no_autoencoder_mixin],
)
def test_error_writes_nothing(pristine, tmp_path, capsys, breakage):
    """A tree the rewrite cannot plan or write: one error line naming the cause (`breakage` returns what it must
    say), exit 2, and every file as it was."""
    root = link_tree(pristine, tmp_path / "checkout")
    messages = breakage(root)
    before = snapshot(root)
    code, _, err = run_rewrite(capsys, root)
    assert code == 2
    assert err.count("\n") == 1 and err.endswith("; nothing was written\n"), err
    for message in messages:
        assert message in err
    assert snapshot(root) == before


def replace_bytes(path: Path, data: bytes) -> None:
    """Write `path` as a new file (the tree may share its old inode with other trees)."""
    path.unlink()
    path.write_bytes(data)


def windows_checkout(pristine: Path, destination: Path) -> Path:
    """A copy of `pristine` as a Windows checkout may hold it: every autoencoder module CRLF, vae.py and
    autoencoder_kl.py with a BOM, and autoencoder_kl_wan.py mixed (its first 100 lines CRLF, the rest LF)."""
    root = link_tree(pristine, destination)
    for path in sorted((root / "src" / "diffusers" / AUTOENCODERS).glob("*.py")):
        data = path.read_bytes()
        assert b"\r" not in data
        if path.name == "autoencoder_kl_wan.py":
            lines = data.splitlines(keepends=True)
            crlf = b"".join(lines[:100]).replace(b"\n", b"\r\n") + b"".join(lines[100:])
        else:
            crlf = data.replace(b"\n", b"\r\n")
        replace_bytes(path, b"\xef\xbb\xbf" + crlf if path.name in ("vae.py", "autoencoder_kl.py") else crlf)
    return root


def test_windows_checkout_keeps_line_endings_and_bom(pristine, tmp_path, capsys):
    code, lf_diff, _ = run_rewrite(capsys, pristine, "--diff")
    assert code == 0
    root = windows_checkout(pristine, tmp_path / "windows")
    autoencoders = root / "src" / "diffusers" / AUTOENCODERS
    before = snapshot(root)
    code, diff, _ = run_rewrite(capsys, root, "--diff")
    assert code == 0
    assert diff.count("\n") == lf_diff.count("\n")
    assert diff.replace("\r\n", "\n") == lf_diff  # the same lines: the methods and the import line, nothing else

    applied = tmp_path / "applied"
    shutil.copytree(autoencoders, applied / "src" / "diffusers" / AUTOENCODERS)
    (applied / TEST_MODULE_PATH).parent.mkdir(parents=True)
    git = subprocess.run(["git", "apply", "-"], input=diff.encode(), cwd=applied, capture_output=True)
    assert git.returncode == 0, git.stderr.decode()

    assert run_rewrite(capsys, root)[0] == 0
    after = snapshot(root)
    patched = snapshot(applied)
    assert {name: after[name] for name in patched} == patched  # the rewrite wrote what the diff says
    for name, data in after.items():
        if name.startswith("src/diffusers/models/autoencoders/") and not name.endswith("_wan.py"):
            assert data.count(b"\n") == data.count(b"\r\n"), name  # every line CRLF, old and new
    assert after["src/diffusers/models/autoencoders/vae.py"].startswith(b"\xef\xbb\xbf")
    assert after["src/diffusers/models/autoencoders/autoencoder_kl.py"].startswith(b"\xef\xbb\xbf")
    unchanged = [name for name in before if after[name] == before[name]]
    assert len(before) - len(unchanged) == lf_diff.count("\n--- a/") + lf_diff.startswith("--- a/")

    code, out, _ = run_rewrite(capsys, root)
    assert code == 0 and "0 files changed" in out
    assert snapshot(root) == after
    assert run_rewrite(capsys, root, "--check")[0] == 0
    assert check_copies.main(["--path", str(root)]) == 0


def test_existing_test_module_keeps_its_bom_and_line_endings(pristine, tmp_path, capsys):
    root = link_tree(pristine, tmp_path / "checkout")
    # An earlier run's module (here listing no method), saved on Windows: refreshed, its BOM and CRLF kept.
    earlier = render_test_module({}).replace("\n", "\r\n")
    (root / TEST_MODULE_PATH).write_bytes(b"\xef\xbb\xbf" + earlier.encode())
    assert run_rewrite(capsys, root)[0] == 0
    data = (root / TEST_MODULE_PATH).read_bytes()
    assert data.startswith(b"\xef\xbb\xbf# Licensed") and data.count(b"\n") == data.count(b"\r\n") > 100
    assert run_rewrite(capsys, root, "--check")[0] == 0


def test_failed_write_puts_every_file_back(pristine, tmp_path, capsys, monkeypatch):
    root = link_tree(pristine, tmp_path / "checkout")
    before = snapshot(root)
    replace, targets = os.replace, []

    def failing(source, target):  # the fifth file cannot be written (a full disk, an append-only file...)
        if not str(target).endswith(".py"):  # the journal's updates
            return replace(source, target)
        targets.append(Path(target))
        if len(targets) == 5:
            raise OSError(28, "No space left on device")
        replace(source, target)

    monkeypatch.setattr(os, "replace", failing)
    code, _, err = run_rewrite(capsys, root)
    assert code == 2
    assert err.count("\n") == 1 and f"cannot write {targets[4]}: [Errno 28] No space left on device" in err
    assert "nothing was written (files replaced before it, put back: 4)" in err
    assert targets[0].name == "vae.py"  # written first: a tree left between two replacements still imports
    assert snapshot(root) == before
    assert not list((root / "src" / "diffusers" / AUTOENCODERS).glob(".*.tileblend-*"))


@pytest.mark.parametrize("edited", ["models/autoencoders/autoencoder_kl.py", "models/autoencoders/vae.py"])
def test_a_file_edited_after_planning_stops_the_write(pristine, tmp_path, edited):
    """An edit made between reading and writing (here: after `plan_rewrite`, before `apply_rewrite`) is never lost:
    nothing is written, the edit stays, the error names the file, and no temporary file is left."""
    root = link_tree(pristine, tmp_path / "checkout")
    plan = plan_rewrite(root)
    path = root / "src" / "diffusers" / edited
    replace_text(path, path.read_text() + "# an edit made while the rewrite ran\n")
    before = snapshot(root)

    with pytest.raises(SourceError, match=f"{path.resolve()} changed since it was read; nothing was written"):
        apply_rewrite(plan)
    assert snapshot(root) == before
    assert not list((root / "src" / "diffusers" / AUTOENCODERS).glob(".*.tileblend-*"))


def test_a_test_module_created_after_planning_stops_the_write(pristine, tmp_path):
    root = link_tree(pristine, tmp_path / "checkout")
    plan = plan_rewrite(root)
    (root / TEST_MODULE_PATH).write_text("# someone else's module\n")
    with pytest.raises(SourceError, match="changed since it was read"):
        apply_rewrite(plan)
    assert (root / TEST_MODULE_PATH).read_text() == "# someone else's module\n"


def moved_behind_a_link(root: Path, folder: Path) -> tuple[Path, Path]:
    """Move the checkout's autoencoder_kl.py into `folder` and leave a symbolic link to it; (link, real file)."""
    kl = root / "src" / "diffusers" / AUTOENCODERS / "autoencoder_kl.py"
    real = folder / "autoencoder_kl.py"
    real.parent.mkdir()
    real.write_bytes(kl.read_bytes())
    kl.unlink()
    kl.symlink_to(real)
    return kl, real


def test_a_symlink_out_of_the_tree_is_refused(pristine, tmp_path, capsys):
    """A module that links to a file outside the checkout: nothing is written, there or in the tree."""
    root = link_tree(pristine, tmp_path / "checkout")
    kl, real = moved_behind_a_link(root, tmp_path / "elsewhere")
    before, outside = snapshot(root), real.read_bytes()

    code, _, err = run_rewrite(capsys, root)
    assert code == 2 and err.count("\n") == 1
    assert f"cannot write {kl}: it links to {real}, outside {root}; nothing was written" in err
    assert snapshot(root) == before and real.read_bytes() == outside


def test_symlinks_mode_and_owner_are_kept(pristine, tmp_path, capsys):
    """A module that links to a file elsewhere in the checkout is written there, keeping its mode and owner."""
    root = link_tree(pristine, tmp_path / "checkout")
    kl, real = moved_behind_a_link(root, root / "elsewhere")
    real.chmod(0o640)
    owner = (4321, 4322) if os.getuid() == 0 else (os.getuid(), os.getgid())
    os.chown(real, *owner)

    assert run_rewrite(capsys, root)[0] == 0
    assert kl.is_symlink() and kl.resolve() == real
    assert "# Copied from diffusers.models.autoencoders.vae.AutoencoderMixin.blend_v" in real.read_text()
    status = real.stat()
    assert (status.st_mode & 0o7777, status.st_uid, status.st_gid) == (0o640, *owner)


@pytest.mark.parametrize("mode", [[], ["--check"], ["--diff"]], ids=["write", "check", "diff"])
def test_a_module_under_two_names_is_refused(pristine, tmp_path, capsys, mode):
    """A symbolic link inside the tree to one of its modules: two paths, one file, which the rewrite would write
    twice. One line names both paths; nothing is written."""
    root = link_tree(pristine, tmp_path / "checkout")
    kl = root / "src" / "diffusers" / AUTOENCODERS / "autoencoder_kl.py"
    alias = kl.with_name("autoencoder_kl_alias.py")
    alias.symlink_to(kl.name)
    before = snapshot(root)
    code, out, err = run_rewrite(capsys, root, *mode)
    assert code == 2 and err.count("\n") == 1 and out == ""
    assert f"{kl} and {alias} are the same file" in err and "nothing was written" in err
    assert snapshot(root) == before and alias.is_symlink()
    assert not [path for path in root.rglob("*") if ".tileblend-" in path.name]


def test_loops_in_nested_classes_are_skipped_and_reported(pristine, tmp_path, capsys):
    root = link_tree(pristine, tmp_path / "checkout")
    kl = root / "src" / "diffusers" / AUTOENCODERS / "autoencoder_kl.py"
    text = kl.read_text()
    cls = next(node for node in ast.parse(text).body if getattr(node, "name", None) == "AutoencoderKL")
    method = next(node for node in cls.body if getattr(node, "name", None) == "blend_v")
    loop = textwrap.indent("".join(text.splitlines(keepends=True)[method.lineno - 1 : method.end_lineno]), " " * 4)
    nested = f"\n\nclass Outer:\n    class Inner:\n{loop}"
    replace_text(kl, text + nested)
    code, out, _ = run_rewrite(capsys, root)
    assert code == 0
    assert (
        "autoencoder_kl.py: skipped (a loop in a nested class, where a copy cannot be checked): Inner.blend_v" in out
    )
    assert ", 1 skipped, " in out
    assert kl.read_text().endswith(nested)


@pytest.mark.parametrize(
    "flag, reason", [("+a", "its directory is append-only (chattr +a)"), ("+i", "its directory is read-only")]
)
def test_an_append_only_or_immutable_directory_is_refused_and_left_clean(pristine, tmp_path, capsys, flag, reason):
    """A directory whose entries cannot be renamed or removed (`chattr +a`/`+i`): refused before any temporary file
    is made there (one could never be removed), nothing written."""
    root = link_tree(pristine, tmp_path / "checkout")
    folder = root / "src" / "diffusers" / AUTOENCODERS
    before = snapshot(root)
    if shutil.which("chattr") is None or subprocess.run(["chattr", flag, str(folder)]).returncode != 0:
        pytest.skip("chattr cannot set attributes here (not root, or a file system without them)")
    try:
        code, _, err = run_rewrite(capsys, root)
        leftovers = [path.name for path in folder.iterdir() if ".tileblend-" in path.name]
    finally:
        subprocess.run(["chattr", flag.replace("+", "-"), str(folder)], check=True)
    assert code == 2 and f"{reason}; nothing was written" in err and err.count("\n") == 1
    assert leftovers == [] and snapshot(root) == before
