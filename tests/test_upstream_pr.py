"""`utils/upstream_pr.py` (`make upstream-pr`): the PR description is filled from the run, never left with a
placeholder, and the rewrite it performs on a checkout is reported with its numbers."""

import json
import re
import shutil
from pathlib import Path

import diffusers
import pytest
from test_rewrite import RUFF_CONFIG


REPO = Path(__file__).resolve().parents[1]
INSTALLED = Path(diffusers.__file__).parent


CHECK = {
    "ok": True,
    "table": "| check | pristine | rewritten |\n| --- | --- | --- |\n| `python utils/check_copies.py` | clean | clean |",
    "added": {"a::TestXTilingBlend::test_tiled_blend_matches_loop[fp32]": "passed", "a::b::c[fp32]": "skipped"},
    "added_classes": ["TestXTilingBlend"],
    "tests": {"pristine": {"seconds": 101.4}, "rewritten": {"seconds": 187.6}},
    "test_command": 'pytest tests/models/autoencoders -k "tiling or slicing or blend"',
    "regressions": [],
}
REWRITE = {
    "diffusers_version": "9.9.9",
    "methods": 7,
    "files": 3,
    "blend_v": 3,
    "blend_h": 3,
    "blend_t": 1,
    "added": 11,
    "removed": 5,
    "ruff": "clean",
}


def test_description_is_filled_from_the_check_run(upstream_pr):
    text = upstream_pr.description(REWRITE | upstream_pr.check_numbers(CHECK))
    assert "$" not in text
    assert CHECK["table"] in text
    assert "replaces the 7 copies of that loop (3 `blend_v`,\n3 `blend_h`, 1 `blend_t` in 3 files" in text
    assert "(CPU, 2 cores, both copies at once: 101 s\nand 188 s" in text
    assert "1 passed, 1 skipped" in text
    assert "`TestXTilingBlend`" in text and "Regressions: 0." in text
    assert "#<ISSUE>" in text  # the coordination issue is a placeholder until a maintainer acknowledges it
    assert '    pytest tests/models/autoencoders -k "tiling or slicing or blend"\n' in text


def test_description_without_a_check_run_says_so(upstream_pr):
    text = upstream_pr.description(REWRITE | upstream_pr.check_numbers(None))
    assert "$" not in text
    assert text.count(upstream_pr.NOT_RUN) >= 5


def test_description_refuses_a_missing_number(upstream_pr):
    numbers = REWRITE | upstream_pr.check_numbers(CHECK)
    del numbers["methods"]
    with pytest.raises(KeyError, match="methods"):
        upstream_pr.description(numbers)


def test_a_stale_check_json_is_refused_before_anything_is_written(upstream_pr, tmp_path, capsys):
    """A JSON from an older `make upstream-check` lacks a number: exit 2 with the key named, the checkout untouched."""
    checkout = make_checkout(tmp_path / "diffusers")
    stale = tmp_path / "upstream-check.json"
    stale.write_text(json.dumps({key: value for key, value in CHECK.items() if key != "test_command"}))
    vae = checkout / "src" / "diffusers" / "models" / "autoencoders" / "vae.py"
    before = vae.read_bytes()
    assert upstream_pr.main([str(checkout), "--check-json", str(stale)]) == 2
    assert "has no 'test_command': rerun `make upstream-check`" in capsys.readouterr().err
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


def test_main_rewrites_and_prints_the_filled_description(upstream_pr, installed_checkout, tmp_path, capsys):
    check = tmp_path / "check.json"
    check.write_text(json.dumps(CHECK))
    assert upstream_pr.main([str(installed_checkout), "--check-json", str(check)]) == 0
    out = capsys.readouterr().out
    summary, description = out.split("---- PR description ----")
    methods = int(re.search(r"(\d+) blend methods in \d+ files", summary).group(1))
    assert methods >= 42
    assert f"replaces the {methods} copies of that loop" in description
    assert f"diffusers {diffusers.__version__}" in description
    assert "ruff format --check: clean" in description
    assert CHECK["table"] in description and "$" not in description


def test_main_refuses_a_tree_that_is_not_diffusers(upstream_pr, tmp_path, capsys):
    assert upstream_pr.main([str(tmp_path)]) == 2
    assert "is not a diffusers checkout" in capsys.readouterr().err


def test_main_checks_copies_and_fixes_none(upstream_pr, tmp_path, capsys):
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
    assert upstream_pr.main([str(root)]) == 1
    out = capsys.readouterr().out
    assert f"{drifted}:2: copy differs from diffusers.models.autoencoders.vae.AutoencoderMixin.disable_tiling" in out
    assert "---- PR description ----" not in out
    assert drifted.read_text() == text
