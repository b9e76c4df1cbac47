"""The one edit engine of the rewrite: a file is parsed once, every edit is computed on that tree, then all are
applied.

An `Edit` replaces whole lines of the file as read (`split_lines`); edits of one file never overlap, and are applied
together by `apply_edits`, which checks that the result parses. The edits the test files need are built here too:
`definition_edits` (a top-level class or function inserted after a line, or kept where it is written already) and `import_edit`
(names added to a `from ... import`), formatted as upstream's ruff formats them (`LINE_LENGTH`, `import_order`).
"""

import ast
from pathlib import Path
from typing import NamedTuple

from .source_files import SourceError, normalize_newlines, with_newline


LINE_LENGTH = 119  # upstream's ruff line-length (pyproject.toml)


class RewriteError(SourceError):
    """The tree cannot be rewritten; nothing was written."""


class Edit(NamedTuple):
    """Replace lines[start:end] of a file by `lines`, generated with "\\n" (they take the file's own ending)."""

    start: int
    end: int
    lines: list[str]


def parse_source(text: str, path: Path) -> ast.Module:
    """The syntax tree of a file's text; raise `RewriteError` naming the file and line when it does not parse."""
    try:
        return ast.parse(text, filename=str(path))
    except SyntaxError as error:
        raise RewriteError(f"cannot parse {path}: line {error.lineno}: {error.msg}") from error


def apply_edits(lines: list[str], edits: list[Edit], newline: str, path: Path) -> str:
    """The text of `lines` with every edit applied, the lines they add written with `newline`; raise `RewriteError`
    when the result does not parse (a safety check of the output: the input was parsed once, before editing)."""
    lines = list(lines)
    for edit in sorted(edits, key=lambda edit: edit.start, reverse=True):
        lines[edit.start : edit.end] = [with_newline(line, newline) for line in edit.lines]
    text = "".join(lines)
    if edits:
        try:
            ast.parse(text)
        except SyntaxError as error:
            raise RewriteError(f"the rewrite of {path} does not parse: {error}") from error
    return text


def first_line(node: ast.FunctionDef | ast.ClassDef) -> int:
    """Index of the definition's first line: its first decorator, or its `def`/`class` line."""
    return (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1


def definition_edits(
    lines: list[str], tree: ast.Module, definitions: list[tuple[str, str, int | None]], path: Path
) -> list[Edit]:
    """The edits writing each (name, text, after) of `definitions` into the file `path`: inserted after line `after`
    (None: at the end of the file), two blank lines above each (definitions inserted at the same place keep their
    order), or nothing where the file defines `name` at top level with exactly that text. Raises `RewriteError` where
    it defines `name` otherwise (someone's own, or edited since it was written): it is not replaced."""
    existing = {node.name: node for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    edits, inserted = [], {}
    for name, text, after in definitions:
        if name in existing:
            node = existing[name]
            if normalize_newlines("".join(lines[first_line(node) : node.end_lineno])) != text:
                raise RewriteError(
                    f"{path}: line {first_line(node) + 1}: {name} is not the text tileblend writes (edited, or "
                    "someone else's); tileblend replaces only its own: rename or remove it; nothing was written"
                )
        else:
            inserted.setdefault(after, []).extend(["\n", "\n", *text.splitlines(keepends=True)])
    for after, added in inserted.items():
        if after is None:  # at the end, after the last line that is not blank
            end = len(lines)
            while end and not lines[end - 1].strip():
                end -= 1
            edits.append(Edit(end, len(lines), added))
        else:
            edits.append(Edit(after, after, added))
    return edits


def import_order(name: str) -> tuple:
    """The sort key of a name in a `from ... import`, as ruff's isort orders them: constants (upper case, longer than
    one letter), then classes (a capital first letter), then the rest, each case-insensitively."""
    return (not (len(name) > 1 and name.isupper()), not name[0].isupper(), name.lower())


def import_edit(tree: ast.Module, module: str, level: int, names: tuple[str, ...]) -> Edit | None:
    """The edit adding `names` to the file's `from <level dots><module> import ...` (one without aliases), or adding
    that import after the file's last import; None when the names are imported already. The statement is written on
    one line, or one name per line where it is longer than `LINE_LENGTH` or was split already."""
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    local = [node for node in imports if isinstance(node, ast.ImportFrom) and node.level == level]
    local = [node for node in local if node.module == module and not any(alias.asname for alias in node.names)]
    statement = f"from {'.' * level}{module} import"
    if not local:
        after = imports[-1].end_lineno
        return Edit(after, after, [f"{statement} {', '.join(sorted(names, key=import_order))}\n"])
    node = local[0]
    present = [alias.name for alias in node.names]
    if set(names) <= set(present):
        return None
    merged = sorted({*present, *names}, key=import_order)
    line = f"{statement} {', '.join(merged)}"
    if len(line) > LINE_LENGTH or node.end_lineno > node.lineno:
        block = [f"{statement} (\n", *[f"    {name},\n" for name in merged], ")\n"]
    else:
        block = [line + "\n"]
    return Edit(node.lineno - 1, node.end_lineno, block)
