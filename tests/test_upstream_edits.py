"""`tileblend.upstream.edits`: the one edit engine behind the rewrite's model and test files, and its import format."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tileblend.upstream.edits import (
    LINE_LENGTH,
    Edit,
    RewriteError,
    apply_edits,
    definition_edits,
    import_edits,
    import_order,
)
from tileblend.upstream.model_files import MethodId


REPO = Path(__file__).resolve().parents[1]
TEXT = "import os\nfrom .utils import b, C\n\n\nclass Kept:\n    pass\n\n\ndef old():\n    return 1\n\n\n"


def edited(text: str, edits: list[Edit], newline: str = "\n") -> str:
    return apply_edits(text.splitlines(keepends=True), edits, newline, Path("x.py"))


def test_edits_apply_in_any_order_and_take_the_files_line_ending():
    lines = TEXT.replace("\n", "\r\n")
    edits = [Edit(8, 10, ["def new():\n", "    return 2\n"]), Edit(0, 1, ["import sys\n"])]
    text = edited(lines, edits, "\r\n")
    assert text == lines.replace("import os", "import sys").replace(
        "def old():\r\n    return 1", "def new():\r\n    return 2"
    )
    assert edited(lines, list(reversed(edits)), "\r\n") == text


def test_an_edit_that_breaks_the_file_is_refused_and_no_edit_keeps_the_text():
    with pytest.raises(RewriteError, match="the rewrite of x.py does not parse"):
        edited(TEXT, [Edit(8, 9, ["def broken(:\n"])])
    assert edited(TEXT, []) == TEXT


def test_definitions_keep_their_own_text_or_insert_in_order(tmp_path):
    lines = TEXT.splitlines(keepends=True)
    tree = ast.parse(TEXT)
    own = "def old():\n    return 1\n"
    assert own in TEXT
    definitions = [("old", own, None), ("A", "class A:\n    pass\n", 6), ("B", "B = 1\n", 6)]
    definitions.append(("last", "def last():\n    pass\n", None))
    text = edited(TEXT, definition_edits(lines, tree, definitions, tmp_path / "m.py"))
    expected = TEXT.replace("    pass\n\n\ndef old", "    pass\n\n\nclass A:\n    pass\n\n\nB = 1\n\n\ndef old")
    assert text == expected.rstrip("\n") + "\n\n\ndef last():\n    pass\n"


def test_a_definition_with_other_text_is_refused_not_replaced(tmp_path):
    """A user's own `old` (or ours, edited) is never overwritten: the error names the file, the line and the name."""
    lines = TEXT.splitlines(keepends=True)
    with pytest.raises(
        RewriteError, match=r"m.py: line \d+: old is not the text tileblend writes .*nothing was written"
    ):
        definition_edits(lines, ast.parse(TEXT), [("old", "def old():\n    return 3\n", None)], tmp_path / "m.py")


def imported(text: str, module: str, level: int, names: tuple[str, ...]) -> str:
    """`text` with `names` imported from `module` (`import_edits`)."""
    lines = text.splitlines(keepends=True)
    return edited(text, import_edits(lines, ast.parse(text), module, level, names, Path("m.py")))


def test_import_edits_insert_where_sorted_and_split_a_long_line():
    """Names go where ruff sorts them into a sorted import (the user's order of an unsorted one is kept), a line
    longer than upstream's limit is split one name per line, and a missing import is added after the last one."""
    assert import_edits(TEXT.splitlines(keepends=True), ast.parse(TEXT), "utils", 1, ("C",), Path("m.py")) == []
    assert imported(TEXT, "utils", 1, ("a", "D")) == TEXT.replace("import b, C\n", "import D, a, b, C\n")
    assert imported(TEXT, "utils", 1, ("e",)) == TEXT.replace("import b, C\n", "import b, C, e\n")
    sorted_text = TEXT.replace("import b, C\n", "import C, b\n")
    assert imported(sorted_text, "utils", 1, ("a", "D")) == TEXT.replace("import b, C\n", "import C, D, a, b\n")
    assert imported(TEXT, "other", 2, ("x",)) == TEXT.replace("import b, C\n", "import b, C\nfrom ..other import x\n")
    long = tuple(f"name_{number}" for number in range(LINE_LENGTH // 8))
    split = imported(sorted_text, "utils", 1, long)
    assert "from .utils import (\n    C,\n    b,\n    name_0,\n" in split and "    name_9,\n)\n" in split


def test_import_edits_keep_the_statements_comments():
    """Into an import written one name per line in parentheses, one line per name is inserted: comments, the user's
    lines and a last name without a comma (which gets one where a name follows) stay as they are."""
    text = "from .utils import (  # ours\n    # first\n    B,  # why\n    c\n)\nfrom ..x import y  # noqa: F401\n"
    assert imported(text, "utils", 1, ("A", "b", "d")) == (
        "from .utils import (  # ours\n    A,\n    # first\n    B,  # why\n    b,\n    c,\n    d,\n)\n"
        "from ..x import y  # noqa: F401\n"
    )
    assert imported(text, "x", 2, ("z",)).endswith("from ..x import y, z  # noqa: F401\n")
    crlf = text.replace("\n", "\r\n")
    lines = crlf.splitlines(keepends=True)
    edits = import_edits(lines, ast.parse(crlf), "utils", 1, ("d",), Path("m.py"))
    assert edited(crlf, edits, "\r\n") == crlf.replace("    c\r\n", "    c,\r\n    d,\r\n")


@pytest.mark.parametrize(
    "text",
    ["from .utils import (b,  # why\n    c)\n", f"from .utils import b, {'c' * 100}  # noqa: F401\n"],
    ids=["split-otherwise", "too-long"],
)
def test_an_import_edit_that_would_move_a_comment_is_refused(text):
    with pytest.raises(RewriteError, match=r"^m.py: line 1: the import from .utils holds a comment or other code"):
        imported(text, "utils", 1, ("a",))


def test_an_import_of_a_name_bound_otherwise_is_refused():
    """A name imported from the module already (in any statement of that import) is left as it is; one the module
    binds in another way is refused, naming the line."""
    text = TEXT + "from .utils import D, x as y\n\nE = 1\n"
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    assert import_edits(lines, tree, "utils", 1, ("C", "D"), Path("m.py")) == []
    with pytest.raises(RewriteError, match=r"^m.py: line 15: E is bound there by other code than tileblend's import"):
        import_edits(lines, tree, "utils", 1, ("E",), Path("m.py"))
    with pytest.raises(RewriteError, match=r"^m.py: line 13: y is bound there"):
        import_edits(lines, tree, "utils", 1, ("y",), Path("m.py"))


def test_import_order_is_ruffs():
    """The names sorted by `import_order` are what ruff's isort (upstream's config) leaves alone, one-letter capitals
    (classes to ruff, not constants) included."""
    names = ["b", "A", "AB", "Cls", "c_d", "X", "xy", "CONST_A", "Z9", "_private", "a"]
    line = f"from .utils import {', '.join(sorted(names, key=import_order))}\n"
    command = [
        sys.executable,
        "-m",
        "ruff",
        "check",
        "--no-cache",
        "--select",
        "I",
        "--diff",
        "--stdin-filename",
        "x.py",
    ]
    result = subprocess.run(command, input=line, capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stdout
    assert line.index("Z9") < line.index(" A,")  # "A" is a class: after the constants "AB", "CONST_A", "Z9"


def test_a_method_id_names_class_and_method():
    method = MethodId("AutoencoderKL", "blend_v")
    assert str(method) == "AutoencoderKL.blend_v" and (method.cls, method.method) == ("AutoencoderKL", "blend_v")
