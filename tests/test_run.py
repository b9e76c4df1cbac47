"""`tileblend run SCRIPT ARGS...` runs an unchanged script as `python SCRIPT ARGS...` would, with blends enabled.

Two tests start the real command in a subprocess (`python -m tileblend` and the `tileblend` console script); the
others call `tileblend.cli.main` in this process, which runs the same code without paying for another interpreter.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

import tileblend
from tileblend.cli import main


SRC = pathlib.Path(__file__).resolve().parents[1] / "src"

PROBE = """\
import json
import sys

import {helper}  # next to the script: importable as under plain python
import tileblend
from diffusers import AutoencoderKL

with open(sys.argv[1], "w") as report:
    json.dump(
        {{
            "argv": sys.argv,
            "name": __name__,
            "enabled": tileblend.is_enabled(),
            "patched": AutoencoderKL.blend_v is not tileblend.patch.original_method(AutoencoderKL, "blend_v"),
            "helper": {helper}.VALUE,
            "path0": sys.path[0],
        }},
        report,
    )
if len(sys.argv) > 2:
    exit_code = sys.argv[2]
    sys.exit(int(exit_code) if exit_code.isdigit() else exit_code)
"""


@pytest.fixture(autouse=True)
def restore_diffusers():
    yield
    tileblend.disable()


@pytest.fixture
def script(tmp_path, request):
    """A probe script that reports what it sees, next to a helper module with a name unique to the test."""
    helper = "helper_" + "".join(c if c.isalnum() else "_" for c in request.node.name)
    directory = tmp_path / "scripts"
    directory.mkdir()
    (directory / f"{helper}.py").write_text("VALUE = 42\n")
    path = directory / "probe.py"
    path.write_text(PROBE.format(helper=helper))
    yield path
    sys.modules.pop(helper, None)


def expected_report(script, *argv):
    return {
        "argv": [str(script), *argv],
        "name": "__main__",
        "enabled": True,
        "patched": True,
        "helper": 42,
        "path0": str(script.parent),
    }


def console_script():
    """The installed `tileblend` command next to this interpreter, or the same entry point called by hand."""
    installed = pathlib.Path(sys.executable).parent / "tileblend"
    if installed.exists():
        return [str(installed)]
    return [sys.executable, "-c", "import sys; from tileblend.cli import main; sys.exit(main())"]


def run_command(command, cwd):
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=300)


def test_python_m_tileblend_run(script, tmp_path):
    report = tmp_path / "report.json"
    completed = run_command([sys.executable, "-m", "tileblend", "run", str(script), str(report), "3"], tmp_path)
    assert completed.returncode == 3, completed.stderr
    # One line says the blends are in effect, so that a user sees it without reading the docs.
    # (Older torch releases warn on import first: the line is tileblend's first.)
    first = next(line for line in completed.stderr.splitlines() if line.startswith("tileblend"))
    assert re.fullmatch(
        rf"tileblend: [1-9][0-9]* diffusers blend methods vectorized; running {re.escape(str(script))}", first
    )
    assert json.loads(report.read_text()) == expected_report(script, str(report), "3")


def test_console_script_run(script, tmp_path):
    report = tmp_path / "report.json"
    completed = run_command([*console_script(), "run", str(script), str(report)], tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(report.read_text()) == expected_report(script, str(report))


def test_argv_path_and_state_restored(script, tmp_path):
    report = tmp_path / "report.json"
    argv, path = list(sys.argv), list(sys.path)
    assert main(["run", str(script), str(report)]) == 0
    assert json.loads(report.read_text()) == expected_report(script, str(report))
    assert sys.argv == argv and sys.path == path


def test_relative_script_sees_argv_as_given(script, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "scripts/probe.py", "report.json"]) == 0
    seen = json.loads((tmp_path / "report.json").read_text())
    assert seen["argv"] == ["scripts/probe.py", "report.json"]
    assert seen["path0"] == str(script.parent) and seen["helper"] == 42


@pytest.mark.parametrize("exit_arg, code", [("0", 0), ("3", 3), ("bad things", 1)])
def test_exit_code_propagates(exit_arg, code, script, tmp_path, capsys):
    assert main(["run", str(script), str(tmp_path / "report.json"), exit_arg]) == code
    assert ("bad things" in capsys.readouterr().err) == (code == 1)


def test_exception_in_script_propagates(tmp_path):
    path = tmp_path / "boom.py"
    path.write_text("raise ValueError('boom')\n")
    with pytest.raises(ValueError, match="boom"):
        main(["run", str(path)])


def test_missing_script_is_a_usage_error(tmp_path):
    completed = run_command([sys.executable, "-m", "tileblend", "run", "no_such_script.py"], tmp_path)
    assert completed.returncode == 2
    assert "no_such_script.py" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_a_directory_runs_its_main_module_as_under_python(tmp_path, capsys):
    """`tileblend run DIR` runs DIR/__main__.py with DIR first on sys.path, as `python DIR` does; a directory without
    one is a usage error that says so."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "helper.py").write_text("VALUE = 'from the neighbour'\n")
    (app / "__main__.py").write_text("import sys, helper\nprint(helper.VALUE, sys.argv[1:])\n")
    assert main(["run", str(app), "--flag"]) == 0
    assert "from the neighbour ['--flag']" in capsys.readouterr().out

    (tmp_path / "empty").mkdir()
    assert main(["run", str(tmp_path / "empty")]) == 2
    assert "can't find '__main__.py' in the directory" in capsys.readouterr().err


def test_script_options_are_not_parsed_by_tileblend(tmp_path, capsys):
    path = tmp_path / "echo.py"
    path.write_text("import sys\nprint(sys.argv[1:])\n")
    assert main(["run", str(path), "--help", "-x", "run"]) == 0
    assert capsys.readouterr().out.strip() == "['--help', '-x', 'run']"


@pytest.mark.parametrize(
    "argv, script_argv",
    [
        (["SCRIPT", "--", "--check"], ["--", "--check"]),  # as `python SCRIPT -- --check`
        (["SCRIPT", "a", "--", "b"], ["a", "--", "b"]),
        (["--", "SCRIPT", "--check"], ["--check"]),  # a `--` before the script ends tileblend's options
    ],
)
def test_double_dash_reaches_the_script_as_under_python(tmp_path, capsys, argv, script_argv):
    path = tmp_path / "echo.py"
    path.write_text("import sys\nprint(sys.argv[1:])\n")
    assert main(["run", *[str(path) if arg == "SCRIPT" else arg for arg in argv]]) == 0
    assert capsys.readouterr().out.strip() == str(script_argv)


def test_no_script_is_a_usage_error(capsys):
    assert main(["run"]) == 2
    assert "no script given" in capsys.readouterr().err
