"""Shared fixtures: the scripts of `utils/` (not a package) as modules."""

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest


UTILS = Path(__file__).resolve().parents[1] / "utils"


def load_utility(name: str) -> ModuleType:
    """`utils/<name>.py` imported as the module `name`, once per session: the scripts import each other that way
    (`utils/upstream_pr.py` runs `import check_copies`), so every test sees the same module object."""
    sys.path.insert(0, str(UTILS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(UTILS))


@pytest.fixture(scope="session")
def check_copies() -> ModuleType:
    return load_utility("check_copies")


@pytest.fixture(scope="session")
def upstream_check() -> ModuleType:
    return load_utility("upstream_check")


@pytest.fixture(scope="session")
def upstream_pr() -> ModuleType:
    return load_utility("upstream_pr")
