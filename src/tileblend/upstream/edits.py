"""The one edit engine of the rewrite: a file is parsed once, every edit is computed on that tree, then all are
applied.

An `Edit` replaces whole lines of the file as read (`split_lines`); edits of one file never overlap, and are applied
together by `apply_edits`, which checks that the result parses. The edits the test files need are built here too:
`definition_edits` (a top-level class or function inserted after a line, kept where it is written already, or
refreshed where it is an earlier text tileblend wrote) and `import_edits` (names added to a `from ... import` without
touching the rest of the statement), formatted as upstream's ruff formats them (`LINE_LENGTH`, `import_order`).
"""

import ast
import io
import tokenize
from pathlib import Path
from typing import NamedTuple

from .source_files import SourceError, normalize_newlines, with_newline
from .written_tests import written


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
        raise RewriteError(f"cannot parse {path}: line {error.lineno}: {error.msg}; nothing was written") from error


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


class _Bindings(ast.NodeVisitor):
    """Collects the names bound in the scope of the statements it visits: nested functions, classes, lambdas and
    comprehensions are scopes of their own, so only their names (and a comprehension's `:=` targets) count, and, in a
    module (`module`), the names a `global` statement anywhere inside them declares. An attribute assigned on a name
    (`Cls.attr = ...`) is recorded as "Cls.attr"."""

    def __init__(self, module: bool):
        self.module = module
        self.found: dict[str, list[tuple[int, ast.AST]]] = {}

    def bind(self, name: str, line: int, node: ast.AST) -> None:
        self.found.setdefault(name, []).append((line, node))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.bind(node.name, first_line(node) + 1, node)
        if self.module:
            for inner in ast.walk(node):
                if isinstance(inner, ast.Global):
                    for name in inner.names:
                        self.bind(name, inner.lineno, inner)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        pass

    def visit_comprehension(self, node: ast.comprehension) -> None:
        for child in (node.iter, *node.ifs):  # its target is the comprehension's own
            self.visit(child)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self.bind(node.id, node.lineno, node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name):
            self.bind(f"{node.value.id}.{node.attr}", node.lineno, node)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                self.bind(alias.asname or alias.name.split(".")[0], alias.lineno, node)

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.bind(node.name, node.lineno, node)
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs | ast.MatchStar) -> None:
        if node.name:
            self.bind(node.name, node.lineno, node)
        self.generic_visit(node)

    visit_MatchStar = visit_MatchAs

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest:
            self.bind(node.rest, node.lineno, node)
        self.generic_visit(node)


def bindings(body: list[ast.stmt], module: bool = True) -> dict[str, list[tuple[int, ast.AST]]]:
    """Every name the statements `body` (a module's, or with `module` False a class's) bind in their own scope ->
    (line, node) of each binding in visiting order: the `def`/`class` node of a definition, the statement of an
    import or a `global`, else the bound node; "Cls.attr" for an attribute assigned on a name. What only running the
    code shows is not seen: names a star-import brings, `globals()[...]`, `setattr`, code of other modules."""
    visitor = _Bindings(module)
    for statement in body:
        visitor.visit(statement)
    return visitor.found


def foreign_binding(path: Path, line: int, name: str, ours: str) -> RewriteError:
    """The error for a binding of `name`, one the rewrite adds (`ours`: what it adds, e.g. "definition"), by other
    code: either would shadow the other."""
    return RewriteError(
        f"{path}: line {line}: {name} is bound there by other code than tileblend's {ours}, which would shadow it or "
        "be shadowed: rename or remove it; nothing was written"
    )


def definition_edits(
    lines: list[str], tree: ast.Module, definitions: list[tuple[str, str, int | None]], path: Path
) -> list[Edit]:
    """The edits writing each (name, text, after) of `definitions` into the file `path`: inserted after line `after`
    (None: at the end of the file), two blank lines above each (definitions inserted at the same place keep their
    order), nothing where the file defines `name` at top level with exactly that text, and that text in place of an
    earlier one tileblend wrote (`written_tests`). Raises `RewriteError` where it defines `name` otherwise (someone's
    own, or edited since it was written): it is not replaced; and where the module binds `name` in any other way
    (`bindings`)."""
    bound = bindings(tree.body)
    edits, inserted = [], {}
    for name, text, after in definitions:
        found = bound.get(name, [])
        for index, (line, node) in enumerate(found):
            if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) or node not in tree.body:
                raise foreign_binding(path, line, name, "definition")
            old = normalize_newlines("".join(lines[first_line(node) : node.end_lineno]))
            if index or (old != text and not written(old)):
                raise RewriteError(
                    f"{path}: line {line}: {name} is not the text tileblend writes (edited, or someone else's); "
                    "tileblend replaces only its own: rename or remove it; nothing was written"
                )
            if old != text:
                edits.append(Edit(first_line(node), node.end_lineno, text.splitlines(keepends=True)))
        if not found:
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


def comment_lines(text: str) -> set[int]:
    """The numbers of the lines of `text` (Python that parses) that hold a comment."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return {token.start[0] for token in tokens if token.type == tokenize.COMMENT}


def _cut(line: str, offset: int) -> tuple[str, str]:
    """`line` split at `offset`, a UTF-8 byte offset as `ast` gives columns."""
    data = line.encode()
    return data[:offset].decode(), data[offset:].decode()


def _positions(existing: list[str], added: list[str]) -> list[int]:
    """For each name of `added` (in `import_order`), the index of the first of `existing` it goes before: the first
    that sorts after it, so that a sorted import stays sorted and the others keep their order."""
    return [
        next((index for index, name in enumerate(existing) if import_order(name) > import_order(new)), len(existing))
        for new in added
    ]


def _rows_edits(lines: list[str], node: ast.ImportFrom, added: list[str]) -> list[Edit]:
    """The edits inserting one `    name,` line per name of `added` into `node`, a parenthesised import with one name
    per line: after the line of the name it follows (or the opening line), a comma added after the last name where a
    name goes after it without one. Nothing else of the statement changes, its comments included."""
    aliases = node.names
    indent = _cut(lines[aliases[0].lineno - 1], aliases[0].col_offset)[0]
    rows: dict[int, list[str]] = {}
    edits = []
    for name, index in zip(added, _positions([alias.name for alias in aliases], added)):
        after = aliases[index - 1].end_lineno if index else node.lineno
        rows.setdefault(after, []).append(f"{indent}{name},\n")
    last = aliases[-1]
    before, rest = _cut(lines[last.end_lineno - 1], last.end_col_offset)
    if last.end_lineno in rows and not rest.lstrip().startswith(","):
        edits.append(Edit(last.end_lineno - 1, last.end_lineno, [normalize_newlines(f"{before},{rest}")]))
    return edits + [Edit(after, after, added_rows) for after, added_rows in rows.items()]


def import_edits(
    lines: list[str], tree: ast.Module, module: str, level: int, names: tuple[str, ...], path: Path
) -> list[Edit]:
    """The edits adding `names` to the file `path`'s `from <level dots><module> import ...` (one without aliases), or
    adding that import after the file's last import; none when the names are imported from there already. The user's
    statement keeps its text, comments and order: into one with a name per line in parentheses, a `    name,` line
    is inserted per name; into one on one line, the names are inserted (where it sorted them, it stays sorted), and
    the line is split one name per line where it gets longer than `LINE_LENGTH`. Raises `RewriteError` where the
    module binds a name it adds in any other way (`bindings`), and where the statement holds a comment that would
    move (a statement split otherwise, or one line that would be split)."""
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    local = [node for node in imports if isinstance(node, ast.ImportFrom) and node.level == level]
    local = [node for node in local if node.module == module]
    imported = {alias.name for node in local for alias in node.names if alias.asname is None}
    added = sorted((name for name in names if name not in imported), key=import_order)
    if not added:
        return []
    bound = bindings(tree.body)
    for name in added:
        if name in bound:
            raise foreign_binding(path, bound[name][0][0], name, "import")
    local = [node for node in local if not any(alias.asname for alias in node.names)]
    statement = f"from {'.' * level}{module} import"
    if not local:
        after = imports[-1].end_lineno
        return [Edit(after, after, [f"{statement} {', '.join(added)}\n"])]
    node = local[0]
    first, last = node.lineno, node.end_lineno
    rows = [alias.lineno for alias in node.names]
    if len(set(rows)) == len(rows) and first < min(rows) and max(rows) < last:
        return _rows_edits(lines, node, added)
    existing = [alias.name for alias in node.names]
    positions = list(zip(added, _positions(existing, added)))
    merged = []
    for index, name in enumerate([*existing, None]):
        merged += [new for new, position in positions if position == index] + ([name] if name else [])
    head = _cut(lines[first - 1], node.col_offset)[0]
    tail = normalize_newlines(_cut(lines[last - 1], node.end_col_offset)[1])
    line = f"{head}{statement} {', '.join(merged)}"
    commented = comment_lines("".join(lines[first - 1 : last]))
    if len(line) <= LINE_LENGTH and first == last:
        return [Edit(first - 1, last, [line + tail])]
    if commented or "#" in tail or head.strip() or tail.strip():
        raise RewriteError(
            f"{path}: line {first}: the import from {'.' * level}{module} holds a comment or other code that adding "
            f"{', '.join(added)} would move: add them yourself, or write the import one name per line in "
            "parentheses; nothing was written"
        )
    return [Edit(first - 1, last, [f"{head}{statement} (\n", *[f"    {name},\n" for name in merged], ")\n"])]
