"""`make upstream-snapshot` (utils/upstream_snapshot.py) on archives shaped like GitHub's (`diffusers-<commit>/...`,
the commit in the pax header), served from file:// URLs; and the tests' own way of finding the snapshot."""

import importlib.util
import io
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest


REPO = Path(__file__).resolve().parents[1]
TREE = {
    "src/diffusers/__init__.py": "",
    "src/diffusers/models/autoencoders/vae.py": "class DecoderOutput: ...\n",
    "utils/check_copies.py": "",
    "tests/models/autoencoders/testing_utils.py": "",
    "tests/conftest.py": "",
    "pyproject.toml": "[tool.ruff]\n",
    "examples/train.py": "not kept\n",
    "tests/pipelines/test_x.py": "not kept\n",
}
KEPT = sorted(name for name in TREE if not name.startswith(("examples/", "tests/pipelines/")))


@pytest.fixture(scope="module")
def snapshot_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("upstream_snapshot", REPO / "utils" / "upstream_snapshot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def github_archive(path: Path, commit: str, tree: dict[str, str]) -> Path:
    """A .tar.gz of `tree` as GitHub serves a commit: under `diffusers-<commit>/`, the commit in the pax header."""
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": commit}) as archive:
        for name, text in tree.items():
            member = tarfile.TarInfo(f"diffusers-{commit}/{name}")
            member.size = len(text.encode())
            archive.addfile(member, io.BytesIO(text.encode()))
    return path


def make_snapshot(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "utils" / "upstream_snapshot.py"), *argv], capture_output=True, text=True
    )


def test_the_download_is_checked_and_its_parts_written_under_diffusers(snapshot_script, tmp_path):
    archive = github_archive(tmp_path / "archive.tar.gz", snapshot_script.COMMIT, TREE)
    folder = tmp_path / "upstream-snapshot"
    completed = make_snapshot("--url", archive.as_uri(), "--folder", str(folder))

    assert completed.returncode == 0, completed.stderr
    assert f"diffusers at {snapshot_script.COMMIT[:7]}, {len(KEPT)} files (checked)" in completed.stdout
    assert sorted(path.name for path in folder.iterdir()) == ["diffusers-main.tar.gz"]  # the download is gone
    with tarfile.open(folder / "diffusers-main.tar.gz") as snapshot:
        assert snapshot.pax_headers["comment"] == snapshot_script.COMMIT
        names = sorted(member.name for member in snapshot if member.isfile())
        assert names == [f"diffusers/{name}" for name in KEPT]
        vae = snapshot.extractfile("diffusers/src/diffusers/models/autoencoders/vae.py").read().decode()
        assert vae == TREE["src/diffusers/models/autoencoders/vae.py"]

    again = make_snapshot("--url", "http://127.0.0.1:9/unused", "--folder", str(folder))  # checked, not downloaded
    assert again.returncode == 0 and "(checked)" in again.stdout


@pytest.mark.parametrize(
    "commit, tree, message",
    [
        ("0" * 40, TREE, "is not diffusers at 58eb52c (its commit: 0000000000000000000000000000000000000000)"),
        (None, {name: text for name, text in TREE.items() if name != "utils/check_copies.py"}, "lacks utils/check"),
    ],
    ids=["another-commit", "missing-file"],
)
def test_an_archive_that_is_not_the_pinned_tree_is_refused(snapshot_script, tmp_path, commit, tree, message):
    archive = github_archive(tmp_path / "archive.tar.gz", commit or snapshot_script.COMMIT, tree)
    folder = tmp_path / "upstream-snapshot"
    completed = make_snapshot("--url", archive.as_uri(), "--folder", str(folder))

    assert completed.returncode == 1
    assert message in completed.stderr and completed.stderr.count("\n") == 2  # "downloading", then the one error
    assert list(folder.iterdir()) == []  # nothing written, the refused download deleted


def test_offline_it_says_where_to_save_the_download_and_then_uses_that_file(snapshot_script, tmp_path):
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/diffusers.tar.gz"  # nothing listens there
    folder = tmp_path / "upstream-snapshot"
    completed = make_snapshot("--url", url, "--folder", str(folder))

    download = folder / f"diffusers-{snapshot_script.COMMIT}.tar.gz"
    assert completed.returncode == 1
    error = completed.stderr.splitlines()[-1]
    assert error.startswith(f"upstream-snapshot: cannot download {url} (")
    assert error.endswith(f"download it elsewhere and save it as {download}, then rerun make upstream-snapshot")
    github_archive(download, snapshot_script.COMMIT, TREE)
    assert make_snapshot("--url", url, "--folder", str(folder)).returncode == 0
    assert sorted(path.name for path in folder.iterdir()) == ["diffusers-main.tar.gz"]


@pytest.mark.slow  # starts pytest three times
def test_the_tests_find_the_snapshot_make_writes_and_require_it_only_when_asked(tmp_path):
    """The `upstream_snapshot` fixture of tests/conftest.py, in a copy of it whose repository has no snapshot: a skip
    naming the make target under CI=true, a failure with TILEBLEND_REQUIRE_SNAPSHOT=1; then the file `make
    upstream-snapshot` writes is found."""
    import os
    import shutil

    (tmp_path / "tests").mkdir()
    shutil.copy(REPO / "tests" / "conftest.py", tmp_path / "tests" / "conftest.py")
    (tmp_path / "tests" / "test_uses_it.py").write_text(
        "def test_it(upstream_snapshot):\n    print(upstream_snapshot)\n"
    )

    def pytest_run(**variables):
        environment = {key: value for key, value in os.environ.items() if key != "TILEBLEND_REQUIRE_SNAPSHOT"}
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-rs", "-s", "tests"]
        return subprocess.run(command, cwd=tmp_path, env=environment | variables, capture_output=True, text=True)

    skipped = pytest_run(CI="true")
    assert skipped.returncode == 0 and "1 skipped" in skipped.stdout, skipped.stdout + skipped.stderr
    assert "the upstream diffusers snapshot is absent: run make upstream-snapshot" in skipped.stdout
    required = pytest_run(TILEBLEND_REQUIRE_SNAPSHOT="1")
    assert required.returncode == 1 and "(TILEBLEND_REQUIRE_SNAPSHOT=1)" in required.stdout
    snapshot = tmp_path / "upstream-snapshot" / "diffusers-main.tar.gz"
    snapshot.parent.mkdir()
    snapshot.write_bytes(b"")
    found = pytest_run(TILEBLEND_REQUIRE_SNAPSHOT="1")
    assert found.returncode == 0 and str(snapshot) in found.stdout, found.stdout + found.stderr
