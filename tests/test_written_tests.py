"""`tileblend.upstream.written_tests`: every test text an earlier tileblend generated is listed, so that a rerun after
an upgrade refreshes it; anything else in its place still stops the rewrite."""

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tileblend.upstream import written_tests
from tileblend.upstream.written_methods import digest


REPO = Path(__file__).resolve().parents[1]
GENERATORS = [f"src/tileblend/upstream/{name}.py" for name in ("test_text", "test_cases", "standalone_test")]
# Run with the `src` folder of one commit first on the path: the texts that commit's generator writes, as JSON.
TEXTS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tileblend.upstream import standalone_test, test_cases, test_text
texts = {"blend_row_loop": test_text.REFERENCE, "mixin": test_text.MIXIN, "standalone": standalone_test.TEMPLATE}
if hasattr(test_text, "ARITHMETIC_MODULE"):
    texts["arithmetic"] = test_text.ARITHMETIC_MODULE
for model, case in test_cases.CASES.items():
    texts[model] = test_text.test_class(model, f"{model}TesterConfig", case)
print(json.dumps(texts))
"""


def generated(source: Path) -> dict[str, str]:
    """The test texts the generator under `source` (a `src` folder) writes."""
    result = subprocess.run([sys.executable, "-c", TEXTS, str(source)], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


@pytest.mark.slow  # starts a Python per commit
def test_every_committed_test_text_is_listed(tmp_path):
    """Every test text generated at a commit since `FIRST_COMMIT` that changed the generator is the current one or
    listed in `EARLIER`. Skipped outside a git checkout with its history."""
    log = subprocess.run(
        ["git", "log", "--format=%H", f"{written_tests.FIRST_COMMIT}^..HEAD", "--", *GENERATORS],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if log.returncode != 0 or not log.stdout:
        pytest.skip("no git history of the test generator here (not a checkout, or a shallow clone)")
    current = {digest(text) for text in generated(REPO / "src").values()}
    for commit in log.stdout.split():
        archive = tmp_path / f"{commit}.tar"
        subprocess.run(["git", "archive", "-o", archive, commit, "src/tileblend"], cwd=REPO, check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp_path / commit, filter="data")
        for name, text in generated(tmp_path / commit / "src").items():
            assert digest(text) in written_tests.EARLIER | current, f"{name} at {commit}: add {digest(text)!r}"
