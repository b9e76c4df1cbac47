"""The test files `tileblend rewrite` edits or writes in a diffusers checkout: text in, `FileRewrite` out, no writes.

Upstream tests each autoencoder with pytest classes composing a `<Model>TesterConfig` with tester mixins
(`tests/models/autoencoders/testing_utils.py` defines `AutoencoderTesterMixin`). In such a checkout the rewrite adds
the reference row loop `blend_row_loop` and `AutoencoderTilingBlendTesterMixin` to that `testing_utils.py` (and
`require_torch_gpu` to its `from ...testing_utils import ...`), in the test file of every rewritten class that has one
and a case in `CASES`, a `Test<Model>TilingBlend` class composing the model's config with the mixin (and the mixin to
the file's `from .testing_utils import ...`), and the module testing `AutoencoderMixin`'s blend methods themselves
(`test_text.ARITHMETIC_MODULE`). Existing classes and methods are not
touched: a definition of one of those names that is not exactly the text tileblend writes (a user's own, or ours
edited) stops the rewrite with an error naming it, so a second run changes nothing. An older checkout with
`tests/models/autoencoders/` but without that layout gets one standalone test module instead
(`tileblend.upstream.standalone_test`). Each file is parsed once and edited through `tileblend.upstream.edits`; it
keeps its line endings, the lines added taking the file's dominant one.
"""

import ast
from pathlib import Path

from .edits import RewriteError, apply_edits, definition_edits, import_edits, parse_source
from .model_files import FileKind, FileRewrite
from .source_files import SourceFile, normalize_newlines, read_source, split_lines, with_newline
from .standalone_test import TEST_MODULE_PATH, render_test_module, written_module
from .test_cases import CASES
from .test_text import (
    ARITHMETIC_MODULE,
    ARITHMETIC_MODULE_PATH,
    MIXIN,
    MIXIN_NAME,
    REFERENCE,
    REFERENCE_NAME,
    TEST_CLASS_SUFFIX,
    TESTING_UTILS_IMPORTS,
    test_class,
)
from .written_tests import written


TESTS = Path("tests", "models", "autoencoders")
TESTING_UTILS = TESTS / "testing_utils.py"


def _config_classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    """Model class name -> the first `<Model>TesterConfig` class of the file whose `model_class` returns it."""
    configs = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "model_class":
                returns = [stmt.value for stmt in item.body if isinstance(stmt, ast.Return)]
                if returns and isinstance(returns[0], ast.Name):
                    configs.setdefault(returns[0].id, node)
    return configs


def _slicing_tiling_end(tree: ast.Module, config: str) -> int | None:
    """Last line of the file's class composing `config` with `AutoencoderTesterMixin`, or None."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = [base.id for base in node.bases if isinstance(base, ast.Name)]
            if config in bases and "AutoencoderTesterMixin" in bases:
                return node.end_lineno
    return None


def _edited(source: SourceFile, tree: ast.Module, definitions: list, imports: list[tuple]) -> FileRewrite:
    """The file with `definitions` (`tileblend.upstream.edits.definition_edits`) written and the names of each of
    `imports` ((module, level, names)) imported."""
    lines = split_lines(source.text)
    edits = definition_edits(lines, tree, definitions, source.path)
    for names in imports:
        edits += import_edits(lines, tree, *names, source.path)
    new = apply_edits(lines, edits, source.newline, source.path)
    return FileRewrite(path=source.path, kind=FileKind.TESTS, old=source.text, new=new, encoding=source.encoding)


def _test_file(source: SourceFile, classes: set[str], tested: set[str]) -> FileRewrite | None:
    """The test file with a test class for each model of `classes` it configures (none of `tested`, which have one in
    an earlier file), or None when it gets none; adds the models it tests to `tested`."""
    tree = parse_source(source.text, source.path)
    written = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    definitions, imports = [], [("testing_utils", 1, (MIXIN_NAME,))]
    for model, config in _config_classes(tree).items():
        name = f"Test{model}{TEST_CLASS_SUFFIX}"
        # A test class an earlier run added is checked too: after `--inherit` its model has no blend method left.
        if (model not in classes and name not in written) or model not in CASES or model in tested:
            continue
        after = _slicing_tiling_end(tree, config.name)
        definitions.append((name, test_class(model, config.name, CASES[model]), after))
        tested.add(model)
    if not definitions:
        return None
    return _edited(source, tree, definitions, imports)


def _layout_files(root: Path, classes: set[str]) -> list[FileRewrite] | None:
    """The edits of upstream's tester-mixin layout for `classes`: testing_utils.py, then every test file that gets a
    test class; None when the checkout does not have that layout (no `AutoencoderTesterMixin` in testing_utils.py)."""
    utils_path = root / TESTING_UTILS
    if not utils_path.is_file():
        return None
    source = read_source(utils_path)
    if "class AutoencoderTesterMixin" not in source.text:
        return None
    tree = parse_source(source.text, utils_path)
    definitions = [(REFERENCE_NAME, REFERENCE, None), (MIXIN_NAME, MIXIN, None)]
    files = [_edited(source, tree, definitions, [("testing_utils", 3, TESTING_UTILS_IMPORTS)])]
    tested = set()
    for path in sorted((root / TESTS).glob("test_*.py")):
        source = read_source(path)
        if "model_class" in source.text and (plan := _test_file(source, classes, tested)) is not None:
            files.append(plan)
    return [*files, _own_module(root / ARITHMETIC_MODULE_PATH, ARITHMETIC_MODULE)]


def _own_module(path: Path, text: str) -> FileRewrite:
    """The test module at `path` holding `text`: written where absent, refreshed where it holds an earlier text
    tileblend wrote (`written_tests`). Raises `RewriteError` where the file holds anything else (someone's own module,
    or ours edited): tileblend replaces only its own."""
    existed = path.exists()
    old = read_source(path) if existed else SourceFile(path, "")
    if existed and normalize_newlines(old.text) != text and not written(normalize_newlines(old.text)):
        raise RewriteError(
            f"{path}: it is not the module tileblend writes (edited, or someone else's); tileblend replaces only its "
            "own: rename or remove it; nothing was written"
        )
    new = with_newline(text, old.newline)
    return FileRewrite(path=path, kind=FileKind.TESTS, old=old.text, new=new, encoding=old.encoding, existed=existed)


def plan_test_files(root: Path, modules: list[FileRewrite]) -> list[FileRewrite]:
    """The test files for the vectorized blends of `modules` (copies or inherited) in the checkout at `root`:
    upstream's tester-mixin layout edited, or (in an older checkout with `tests/models/autoencoders/`) the standalone
    test module; none in a checkout with neither. Raises `RewriteError` for a file that does not parse."""
    classes = {method.cls for plan in modules for method in plan.vectorized}
    layout = _layout_files(root, classes)
    if layout is not None:
        return layout
    test_path = root / TEST_MODULE_PATH
    if not test_path.parent.is_dir():
        return []
    existed = test_path.exists()
    old = read_source(test_path) if existed else SourceFile(test_path, "")
    classes = {plan.path.stem: plan.vectorized for plan in modules}
    if existed and not written_module(normalize_newlines(old.text)):
        raise RewriteError(
            f"{test_path}: it is not the module tileblend writes (edited, or someone else's); tileblend replaces only "
            "its own: rename or remove it; nothing was written"
        )
    new = with_newline(render_test_module(classes), old.newline)
    return [
        FileRewrite(path=test_path, kind=FileKind.TESTS, old=old.text, new=new, encoding=old.encoding, existed=existed)
    ]
