"""A non-editable install works: the wheel built from the repository gives a working `tileblend` command.

This is what `pip install "git+<repo url>"` does: build a wheel from a clean checkout and install it. The test builds
from a copy of the packaging files and `src/` (so the checkout stays clean), installs into a temporary target, and
runs the command from another directory with only that target on the path. And the README's install steps, as
written, in a fresh venv.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest


pytestmark = pytest.mark.slow  # starts processes: not in the fast tier (`-m 'not slow'`)


ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGING_FILES = ["setup.py", "pyproject.toml", "README.md", "LICENSE"]


def pip(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check", "--no-input"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The install target holding the wheel's files (and its `bin/tileblend`)."""
    pytest.importorskip("setuptools")
    pytest.importorskip("wheel")
    checkout = tmp_path_factory.mktemp("checkout")
    for name in PACKAGING_FILES:
        shutil.copy(ROOT / name, checkout / name)
    shutil.copytree(ROOT / "src", checkout / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))

    wheels = tmp_path_factory.mktemp("wheels")
    built = pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), ".", cwd=checkout)
    assert built.returncode == 0, built.stderr
    [wheel] = wheels.glob("tileblend-*.whl")

    target = tmp_path_factory.mktemp("target")
    installed = pip("install", "--no-deps", "--target", str(target), str(wheel), cwd=wheels)
    assert installed.returncode == 0, installed.stderr
    return target


def run_installed(command, target, cwd):
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    environment["PYTHONPATH"] = str(target)
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=300)


def check_help(completed):
    assert completed.returncode == 0, completed.stderr
    for subcommand in ("run", "verify", "bench", "rewrite"):
        assert subcommand in completed.stdout


def test_wheel_holds_the_package_and_entry_point(installed):
    assert (installed / "tileblend" / "blend.py").is_file()
    assert (installed / "tileblend" / "bench" / "blend.py").is_file()
    assert (installed / "tileblend" / "verify" / "cli.py").is_file()
    assert (installed / "tileblend" / "upstream" / "rewrite.py").is_file()
    assert (installed / "tileblend" / "parallel" / "passes.py").is_file()
    # Every file of src/tileblend, the data files too: the drafts and the scripts they embed, which are no package.
    source = ROOT / "src" / "tileblend"
    for path in source.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            assert (installed / "tileblend" / path.relative_to(source)).is_file(), path
    [dist_info] = installed.glob("tileblend-*.dist-info")
    assert "tileblend = tileblend.cli:main" in (dist_info / "entry_points.txt").read_text()


def test_python_m_tileblend_from_the_install(installed, tmp_path):
    where = run_installed([sys.executable, "-c", "import tileblend; print(tileblend.__file__)"], installed, tmp_path)
    assert pathlib.Path(where.stdout.strip()).is_relative_to(installed), where.stdout + where.stderr
    check_help(run_installed([sys.executable, "-m", "tileblend", "--help"], installed, tmp_path))


def test_console_script_from_the_install(installed, tmp_path):
    check_help(run_installed([str(installed / "bin" / "tileblend"), "--help"], installed, tmp_path))


def readme_install_steps() -> list[str]:
    """The shell lines of the README's install steps: its bash blocks under "Try it on your diffusers code"."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Try it on your diffusers code", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_the_readme_install_steps_work_as_written_in_a_fresh_venv(tmp_path):
    """The README's steps, literally, from a new `python3 -m venv` (whose pip may be too old for the install line
    without the README's upgrade), with the repository URL a git+file URL of this checkout's committed tree; then the
    check the README names, `tileblend verify --quick`. torch comes from whatever index or folder pip is configured
    with here (this project's machines keep the CPU wheel on disk)."""
    steps = readme_install_steps()
    assert any(line.startswith("python3 -m venv") for line in steps), steps
    assert any('"tileblend[bench] @ git+<repository URL>"' in line for line in steps), steps
    assert "`tileblend verify --quick`" in (ROOT / "README.md").read_text(encoding="utf-8")
    script = "\n".join(["set -euo pipefail", *steps, "tileblend verify --quick --no-progress"])
    script = script.replace("<repository URL>", ROOT.as_uri())
    # The user's shell: none of this checkout's venv on PATH, no PYTHONPATH.
    path = os.pathsep.join(entry for entry in os.environ["PATH"].split(os.pathsep) if str(ROOT) not in entry)
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    completed = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=environment | {"PATH": path}, capture_output=True, text=True,
        timeout=3600,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert re.search(r"(\d+) of \1 method/dtype pairs exact on cpu", completed.stdout), completed.stdout[-2000:]
    [installed] = (tmp_path / "tileblend-env").glob("lib/python*/site-packages/tileblend/__init__.py")
    assert installed.is_file()  # a real install in the new venv, not this checkout
