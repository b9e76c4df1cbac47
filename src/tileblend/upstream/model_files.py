"""The model files of `tileblend rewrite`: one autoencoder module's text in, its rewritten text out, no file IO.

`plan_module` plans a module of `models/autoencoders` other than vae.py: every method that `tileblend.recognize`
identifies as the row loop (or that already carries the mixin's "Copied from" comment) becomes

    # Copied from diffusers.models.autoencoders.vae.AutoencoderMixin.blend_X
    <the AutoencoderMixin method, same text>

a self-contained method: no import changes. A method is replaced (or deleted) only when it is the loop, exactly that
text, or exactly the tree's own mixin method under that comment (an earlier run's copy); one under that comment with
other text (edited since) is left alone and reported. With `inherit`, such a method of a class that names
`AutoencoderMixin` among its bases is deleted instead (with its comment), so the class inherits the mixin's; only
classes that do not derive from the mixin keep copies. `plan_vae` plans vae.py: the same for its own loops, plus the
`AutoencoderMixin` methods, added, or refreshed where each is the loop or a text tileblend wrote
(`tileblend.upstream.written_methods`); any other method or binding of those names stops the rewrite. Both parse their
input once, compute every edit on that one tree (the edits never overlap) and apply them together; the result is a
`FileRewrite`. The text of every copy and of its source comes from one `UpstreamCode`, so the rewriter is what keeps
tileblend's copies in sync: a rerun refreshes them all (`tileblend.upstream.copies` only checks them). Edits go through
`tileblend.upstream.edits`.
"""

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import NamedTuple

from ..recognize import blend_candidates, recognize
from .blend_methods import SOURCE_CLASS, UpstreamCode
from .edits import Edit, RewriteError, apply_edits, bindings, first_line, foreign_binding, parse_source
from .source_files import COPIED_FROM, SourceFile, normalize_newlines, split_lines
from .written_methods import written


VAE_MODULE = "vae"
FIRST_SUPPORTED_VERSION = "0.36.0"  # the first diffusers release with AutoencoderMixin
BLEND_DEFINITION = re.compile(r"\bdef\s+blend_[vht]\b")


class MethodId(NamedTuple):
    """A blend method of a class: `cls` the class name, `method` one of "blend_v", "blend_h", "blend_t"."""

    cls: str
    method: str

    def __str__(self) -> str:
        return f"{self.cls}.{self.method}"


class FileKind(Enum):
    """What a planned file is to the rewrite."""

    VAE = "vae"  # models/autoencoders/vae.py: the AutoencoderMixin methods (the copies' source)
    MODULE = "module"  # another module of models/autoencoders: its loops become copies
    TESTS = "tests"  # an upstream test file the rewrite edits or creates


@dataclass
class FileRewrite:
    """The planned change of one file: its old and new text (line endings as stored), how it is stored, and what
    changed in it."""

    path: Path
    kind: FileKind
    old: str
    new: str
    encoding: str = "utf-8"  # "utf-8-sig" for a file that starts with a BOM
    existed: bool = True  # False for a file the rewrite creates
    rewritten: list[MethodId] = field(default_factory=list)  # replaced from the loop (or refreshed)
    up_to_date: list[MethodId] = field(default_factory=list)  # already the current copy
    skipped: list[MethodId] = field(default_factory=list)  # named like a blend, not recognised
    edited: list[MethodId] = field(default_factory=list)  # under tileblend's "Copied from", not its text: left alone
    nested: list[MethodId] = field(default_factory=list)  # loops in a class that is not at module level
    deleted: list[MethodId] = field(default_factory=list)  # deleted: the class inherits the mixin's
    derived: list[MethodId] = field(default_factory=list)  # loops and our unedited copies in mixin subclasses
    mixin_written: bool = False  # vae.py only: AutoencoderMixin holds tileblend's three methods already
    dropped: dict[MethodId, list[int]] = field(default_factory=dict)  # comment lines inside a loop replaced or deleted

    @property
    def changed(self) -> bool:
        return self.old != self.new

    @property
    def copies(self) -> list[MethodId]:
        """Every method that is the mixin's copy once the plan is written."""
        return self.rewritten + self.up_to_date

    @property
    def vectorized(self) -> list[MethodId]:
        """Every method that runs the mixin's blend once the plan is written: its copies and the methods
        deleted in favour of the inherited ones."""
        return self.copies + self.deleted


def _indent(text: str, indent: str) -> list[str]:
    """Lines of a method text written at one level (4 spaces), re-indented to `indent`."""
    return [indent + line[4:] if line.strip() else line for line in text.splitlines(keepends=True)]


def _copied_from_start(lines: list[str], def_index: int) -> tuple[int, str | None]:
    """Index of the first "Copied from" comment line directly above line `def_index`, and its target."""
    start, target = def_index, None
    while start > 0 and (match := COPIED_FROM.match(lines[start - 1])):
        start -= 1
        target = target or match.group(2)
    return start, target


def _inherits_mixin(cls: ast.ClassDef) -> bool:
    """Whether the class names `AutoencoderMixin` among its bases."""
    return any(isinstance(base, ast.Name) and base.id == SOURCE_CLASS for base in cls.bases)


def _comment_lines(text: str) -> set[int]:
    """The numbers of the lines of `text` (Python that parses) that hold a comment."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return {token.start[0] for token in tokens if token.type == tokenize.COMMENT}


def _drops(plan: FileRewrite, name: MethodId, function: ast.FunctionDef, comments: set[int]) -> None:
    """Note in the plan the comments inside `function` (decorators to last line), a loop the rewrite replaces or
    deletes whole."""
    if dropped := sorted(line for line in comments if first_line(function) < line <= function.end_lineno):
        plan.dropped[name] = dropped


def _deletion(lines: list[str], start: int, end: int) -> Edit:
    """The edit deleting lines[start:end] (a method and its comments) with one of the blank lines around it."""
    if end < len(lines) and not lines[end].strip():
        return Edit(start, end + 1, [])
    if start > 0 and not lines[start - 1].strip():
        return Edit(start - 1, end, [])
    return Edit(start, end, [])


def _copy_edits(
    plan: FileRewrite,
    lines: list[str],
    tree: ast.Module,
    code: UpstreamCode,
    inherit: bool,
    earlier: dict[str, str],
    comments: set[int],
) -> list[Edit]:
    """The edits turning the file's loops, and copies of the mixin's methods as the tree holds them (`earlier`, an
    earlier run's: `plan_vae` stops the rewrite where they are not tileblend's text), into copies of `code`, or with `inherit` deleting those of classes that derive from
    `AutoencoderMixin` (vae.py's own `AutoencoderMixin` excepted); fills the plan's lists of rewritten, up-to-date,
    deleted, skipped, edited and nested methods, and the `comments` lines inside the loops it replaces or deletes."""
    edits = []
    for cls, function in blend_candidates(tree):
        if plan.kind is FileKind.VAE and cls.name == SOURCE_CLASS and cls in tree.body:
            continue
        name = MethodId(cls.name, function.name)
        start, target = _copied_from_start(lines, first_line(function))
        indent = lines[function.lineno - 1][: function.col_offset]
        comment = f"{indent}# Copied from {code.copied_from(function.name)}\n"
        text = normalize_newlines("".join(lines[start : function.end_lineno]))
        written = text == "".join([comment, *_indent(code.methods[function.name], indent)])
        ours = target == code.copied_from(function.name).removeprefix("diffusers.")
        synced = function.name in earlier and text == "".join([comment, *_indent(earlier[function.name], indent)])
        if _inherits_mixin(cls) and (written or synced or recognize(function) is not None):
            plan.derived.append(name)
        if not synced and recognize(function) is None and not written:
            (plan.edited if ours else plan.skipped).append(name)
            continue
        if cls not in tree.body:
            plan.nested.append(name)
            continue
        if not (written or synced):
            _drops(plan, name, function, comments)
        if inherit and _inherits_mixin(cls):
            plan.deleted.append(name)
            edits.append(_deletion(lines, start, function.end_lineno))
        elif written:
            plan.up_to_date.append(name)
        else:
            plan.rewritten.append(name)
            edits.append(Edit(start, function.end_lineno, [comment, *_indent(code.methods[function.name], indent)]))
    return edits


def _check_attributes(plan: FileRewrite, tree: ast.Module) -> None:
    """Raise `RewriteError` where the module assigns, at module level, a blend method of `AutoencoderMixin` or of a
    class whose method the plan vectorizes (`Cls.blend_v = ...`): it would replace that method when the module runs."""
    classes = {SOURCE_CLASS, *(method.cls for method in plan.vectorized)}
    for name, found in bindings(tree.body).items():
        cls, _, method = name.partition(".")
        if cls in classes and BLEND_DEFINITION.match(f"def {method}"):
            raise foreign_binding(plan.path, found[0][0], name, "method")


def plan_module(
    source: SourceFile, code: UpstreamCode, inherit: bool = False, earlier: dict[str, str] | None = None
) -> FileRewrite:
    """Plan the rewrite of an autoencoder module other than vae.py (not parsed when it defines no `blend_v/h/t`); with
    `inherit`, the loops of classes deriving from `AutoencoderMixin` are deleted rather than copied over. `earlier`
    holds the tree's own `AutoencoderMixin` methods (`mixin_methods`): copies of those are an earlier run's."""
    plan = FileRewrite(
        path=source.path, kind=FileKind.MODULE, old=source.text, new=source.text, encoding=source.encoding
    )
    if BLEND_DEFINITION.search(source.text) is None:
        return plan
    lines = split_lines(source.text)
    tree = parse_source(source.text, source.path)
    edits = _copy_edits(plan, lines, tree, code, inherit, earlier or {}, _comment_lines(source.text))
    _check_attributes(plan, tree)
    plan.new = apply_edits(lines, edits, source.newline, source.path)
    return plan


def _mixin_edits(
    plan: FileRewrite, mixin: ast.ClassDef, lines: list[str], code: UpstreamCode, comments: set[int]
) -> list[Edit]:
    """The edits writing the mixin's blend methods: over a loop of that name or a text tileblend wrote
    (`tileblend.upstream.written_methods`: the whole method, decorators to last line), the missing ones appended to
    the class. Raises `RewriteError` for a method of that name that is neither (an edited body under tileblend's
    docstring too), and for any other binding of the name in the class body. Notes the `comments` lines inside a loop
    it replaces."""
    path = plan.path
    bound = bindings(mixin.body, module=False)
    edits, appended = [], []
    for name, text in code.methods.items():
        found = bound.get(name, [])
        if not found:
            appended += ["\n", *text.splitlines(keepends=True)]
            continue
        method = found[0][1]
        others = found[1:] if isinstance(method, ast.FunctionDef) and method in mixin.body else found
        if others:
            raise foreign_binding(path, others[0][0], f"{SOURCE_CLASS}.{name}", "method")
        old = normalize_newlines("".join(lines[first_line(method) : method.end_lineno]))
        if old == text:
            continue
        if not written(name, old, code):
            if recognize(method) is None:
                raise RewriteError(
                    f"{path}: line {first_line(method) + 1}: {SOURCE_CLASS}.{name} is neither the row loop nor a "
                    "text tileblend wrote (edited, or someone else's); tileblend replaces only those: undo the edit "
                    "or rename the method; nothing was written"
                )
            _drops(plan, MethodId(SOURCE_CLASS, name), method, comments)
        edits.append(Edit(first_line(method), method.end_lineno, text.splitlines(keepends=True)))
    if appended:
        edits.append(Edit(mixin.end_lineno, mixin.end_lineno, appended))
    return edits


def mixin_class(tree: ast.Module, path: Path) -> ast.ClassDef | None:
    """vae.py's `AutoencoderMixin` class (at module level), or None. Raises `RewriteError` where the module binds the
    name more than once at module level (two classes, a class and an assignment or import): which one the models
    derive from depends on the order the module runs."""
    found = bindings(tree.body).get(SOURCE_CLASS, [])
    if len(found) > 1:
        raise RewriteError(
            f"{path}: line {found[1][0]}: {SOURCE_CLASS} is bound more than once at module level (first at line "
            f"{found[0][0]}): the rewrite cannot tell which one the models derive from; keep one; nothing was written"
        )
    return next((node for _, node in found if isinstance(node, ast.ClassDef) and node in tree.body), None)


def mixin_methods(source: SourceFile) -> dict[str, str]:
    """The blend methods of vae.py's `AutoencoderMixin` as the file holds them (newlines normalized), by name."""
    tree = parse_source(source.text, source.path)
    lines = split_lines(source.text)
    mixin = mixin_class(tree, source.path)
    methods = [node for node in mixin.body if isinstance(node, ast.FunctionDef)] if mixin else []
    return {
        node.name: normalize_newlines("".join(lines[first_line(node) : node.end_lineno]))
        for node in methods
        if BLEND_DEFINITION.match(f"def {node.name}")
    }


def plan_vae(source: SourceFile, code: UpstreamCode, version: str, inherit: bool = False) -> FileRewrite:
    """Plan the rewrite of vae.py: the `AutoencoderMixin` blend methods added or refreshed (only where they are the
    loop or a text tileblend wrote), and its own loops (outside the mixin) made copies, or deleted with `inherit`.
    `version` (the tree's diffusers version) names the tree in the error raised when vae.py has no
    `AutoencoderMixin`."""
    plan = FileRewrite(path=source.path, kind=FileKind.VAE, old=source.text, new=source.text, encoding=source.encoding)
    tree = parse_source(source.text, source.path)
    mixin = mixin_class(tree, source.path)
    if mixin is None:
        raise RewriteError(
            f"{source.path} has no class {SOURCE_CLASS} (diffusers {version}): tileblend rewrite supports "
            f"diffusers {FIRST_SUPPORTED_VERSION} and later, where the blends' source can be a method of "
            f"{SOURCE_CLASS}; tileblend.enable() works on this version; nothing was written"
        )
    lines = split_lines(source.text)
    comments = _comment_lines(source.text)
    edits = _copy_edits(plan, lines, tree, code, inherit, mixin_methods(source), comments)
    _check_attributes(plan, tree)
    mixin_edits = _mixin_edits(plan, mixin, lines, code, comments)
    plan.mixin_written = not mixin_edits
    plan.new = apply_edits(lines, edits + mixin_edits, source.newline, source.path)
    return plan
