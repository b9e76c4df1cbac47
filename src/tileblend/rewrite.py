"""`tileblend rewrite PATH`: write the vectorized blend into a diffusers source tree, as an upstream pull request.

`blend_tiles` goes into `models/autoencoders/vae.py` with `blend_v`, `blend_h` and `blend_t` as methods of
`AutoencoderMixin` (text from `tileblend.upstream_code`). Every method that `tileblend.recognize` identifies as the
row loop (the recogniser `tileblend.enable()` uses) is replaced in place by

    # Copied from diffusers.models.autoencoders.vae.AutoencoderMixin.blend_X
    <the AutoencoderMixin method, same text>

and `blend_tiles` is added to the file's `from .vae import ...`. Copies written by an earlier run are refreshed from
the current source (so a second run changes nothing), methods named like blends that are neither are left alone and
reported, and so are loops in nested classes (a "Copied from" copy there cannot be checked). Every file that defines a
method named like a blend is parsed and every edit computed before anything is written; the files are then written
all or nothing, vae.py first (`tileblend.source_files.write_files`). Each file keeps its encoding (a UTF-8 BOM) and
its line endings: lines the rewrite adds take the file's dominant ending. In a checkout with upstream's tester-mixin
layout the rewrite adds a tiling-blend tester mixin and a test class per rewritten model
(`tileblend.upstream_layout`); in an older checkout with `tests/models/autoencoders/` it writes one standalone test
module (`tileblend.upstream_tests`).

The tree must have `AutoencoderMixin` in vae.py, as diffusers has since 0.36.0 (`tileblend.enable()` works on older
versions too).
"""

import argparse
import ast
import difflib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .recognize import blend_candidates, recognize
from .source_files import (
    COPIED_FROM,
    SourceError,
    SourceFile,
    dominant_newline,
    find_package,
    normalize_newlines,
    read_source,
    split_lines,
    with_newline,
    write_files,
)
from .upstream_code import SOURCE_CLASS, UpstreamCode, upstream_code
from .upstream_layout import TestLayoutError, has_tester_layout, plan_test_files
from .upstream_tests import TEST_MODULE_PATH, render_test_module


AUTOENCODERS = Path("models", "autoencoders")
VAE_MODULE = "vae"
FIRST_SUPPORTED_VERSION = "0.36.0"  # the first diffusers release with AutoencoderMixin
LINE_LENGTH = 119
BLEND_DEFINITION = re.compile(r"\bdef\s+blend_[vht]\b")


class RewriteError(SourceError):
    """The tree cannot be rewritten; nothing was written."""


@dataclass
class FileRewrite:
    """The planned change of one file: its old and new text (line endings as stored), how it is stored, and what
    changed in it."""

    path: Path
    old: str
    new: str
    encoding: str = "utf-8"  # "utf-8-sig" for a file that starts with a BOM
    rewritten: list[str] = field(default_factory=list)  # "Class.method" replaced from the loop (or refreshed)
    up_to_date: list[str] = field(default_factory=list)  # "Class.method" already the current copy
    skipped: list[str] = field(default_factory=list)  # "Class.method" named like a blend, not recognised
    nested: list[str] = field(default_factory=list)  # "Class.method" loops in a class that is not at module level

    @property
    def changed(self) -> bool:
        return self.old != self.new


def diffusers_tree(path: Path) -> tuple[Path, Path | None]:
    """Return (the `diffusers` package directory, the checkout root or None) for a checkout or a package dir."""
    found = find_package(path)
    if found is None or not (found[0] / AUTOENCODERS / f"{VAE_MODULE}.py").is_file():
        raise RewriteError(f"{path} is not a diffusers checkout (no src/diffusers/) or diffusers package directory")
    return found


def _version(package: Path) -> str:
    """The `__version__` written in the package's `__init__.py`, or "unknown"."""
    match = re.search(r'^__version__ = "([^"]+)"', (package / "__init__.py").read_text(errors="replace"), re.M)
    return match.group(1) if match else "unknown"


def _read(path: Path) -> tuple[SourceFile, ast.Module | None]:
    """The source of `path` and its syntax tree (None when no method can be named like a blend, to save the parse)."""
    source = read_source(path)
    if BLEND_DEFINITION.search(source.text) is None:
        return source, None
    return source, _parse(source.text, path)


def _parse(text: str, path: Path) -> ast.Module:
    try:
        return ast.parse(text, filename=str(path))
    except SyntaxError as error:
        raise RewriteError(f"cannot parse {path}: line {error.lineno}: {error.msg}") from error


def _apply(lines: list[str], edits: list[tuple[int, int, list[str]]], newline: str) -> str:
    """Replace lines[start:end] by each edit's lines (generated with "\\n", written with `newline`); edits must not
    overlap."""
    for start, end, replacement in sorted(edits, key=lambda edit: edit[0], reverse=True):
        lines[start:end] = [with_newline(line, newline) for line in replacement]
    return "".join(lines)


def _indent(text: str, indent: str) -> list[str]:
    """Lines of a method text written at one level (4 spaces), re-indented to `indent`."""
    return [indent + line[4:] if line.strip() else line for line in text.splitlines(keepends=True)]


def _name_order(name: str) -> tuple[int, str, str]:
    """isort's order-by-type, as ruff applies it: CONSTANTS, then Classes, then functions and variables."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[0].isupper() else 2
    return kind, name.lower(), name


def _import_lines(names: list[str], wrapped: bool = False) -> list[str]:
    """`from .vae import <names>` as ruff formats it: one line if it fits (and was not wrapped before), else one name
    per line."""
    names = sorted(names, key=_name_order)
    line = f"from .{VAE_MODULE} import {', '.join(names)}\n"
    if len(line) - 1 <= LINE_LENGTH and not wrapped:
        return [line]
    return [f"from .{VAE_MODULE} import (\n", *[f"    {name},\n" for name in names], ")\n"]


def _import_edit(tree: ast.Module, path: Path):
    """The edit adding `blend_tiles` to the file's `from .vae import ...`, or None when it is there already."""
    imports = [
        node
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module == VAE_MODULE
    ]
    if any(alias.name == "blend_tiles" and alias.asname is None for node in imports for alias in node.names):
        return None
    # ruff keeps aliased names in statements of their own: extend one without aliases.
    plain = [node for node in imports if not any(alias.asname for alias in node.names)]
    if not plain:
        raise RewriteError(f"{path} has no `from .{VAE_MODULE} import ...` (without aliases) to add blend_tiles to")
    names = [alias.name for alias in plain[0].names] + ["blend_tiles"]
    wrapped = plain[0].end_lineno > plain[0].lineno
    return plain[0].lineno - 1, plain[0].end_lineno, _import_lines(names, wrapped)


def _copied_from_start(lines: list[str], def_index: int) -> tuple[int, str | None]:
    """Index of the first "Copied from" comment line directly above line `def_index`, and its target."""
    start, target = def_index, None
    while start > 0 and (match := COPIED_FROM.match(lines[start - 1])):
        start -= 1
        target = target or match.group(2)
    return start, target


def plan_module(path: Path, code: UpstreamCode) -> FileRewrite:
    """Plan the rewrite of one autoencoder module (not vae.py's own `AutoencoderMixin` methods)."""
    source, tree = _read(path)
    lines = split_lines(source.text)
    plan = FileRewrite(path=path, old=source.text, new=source.text, encoding=source.encoding)
    if tree is None:
        return plan
    edits = []
    for cls, function in blend_candidates(tree):
        if path.stem == VAE_MODULE and cls.name == SOURCE_CLASS and cls in tree.body:
            continue
        name = f"{cls.name}.{function.name}"
        first = (function.decorator_list[0].lineno if function.decorator_list else function.lineno) - 1
        start, target = _copied_from_start(lines, first)
        ours = target == code.copied_from(function.name).removeprefix("diffusers.")
        if recognize(function) is None and not ours:
            plan.skipped.append(name)
            continue
        if cls not in tree.body:
            plan.nested.append(name)
            continue
        indent = lines[function.lineno - 1][: function.col_offset]
        replacement = [f"{indent}# Copied from {code.copied_from(function.name)}\n"]
        replacement += _indent(code.methods[function.name], indent)
        if normalize_newlines("".join(lines[start : function.end_lineno])) == "".join(replacement):
            plan.up_to_date.append(name)
        else:
            plan.rewritten.append(name)
            edits.append((start, function.end_lineno, replacement))
    if plan.rewritten or plan.up_to_date:
        if path.stem != VAE_MODULE and (edit := _import_edit(tree, path)) is not None:
            edits.append(edit)
    plan.new = _apply(lines, edits, source.newline)
    return plan


def plan_vae(plan: FileRewrite, code: UpstreamCode) -> FileRewrite:
    """Add (or refresh) `blend_tiles` and the `AutoencoderMixin` blend methods on top of vae.py's module plan."""
    lines = split_lines(plan.new)
    tree = _parse(plan.new, plan.path)
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == SOURCE_CLASS]
    if not classes:
        package = plan.path.parents[len(AUTOENCODERS.parts)]
        raise RewriteError(
            f"{plan.path} has no class {SOURCE_CLASS} (diffusers {_version(package)}): tileblend rewrite supports "
            f"diffusers {FIRST_SUPPORTED_VERSION} and later, where the blends' source can be a method of "
            f"{SOURCE_CLASS}; tileblend.enable() works on this version"
        )
    mixin = classes[0]
    edits = []
    function_lines = code.function.splitlines(keepends=True)
    existing = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "blend_tiles"]
    if existing:
        edits.append((existing[0].lineno - 1, existing[0].end_lineno, function_lines))
    else:
        first = (mixin.decorator_list[0].lineno if mixin.decorator_list else mixin.lineno) - 1
        edits.append((first, first, function_lines + ["\n", "\n"]))
    methods = {node.name: node for node in mixin.body if isinstance(node, ast.FunctionDef)}
    appended = []
    for name, text in code.methods.items():
        if name in methods:
            edits.append((methods[name].lineno - 1, methods[name].end_lineno, text.splitlines(keepends=True)))
        else:
            appended += ["\n", *text.splitlines(keepends=True)]
    if appended:
        edits.append((mixin.end_lineno, mixin.end_lineno, appended))
    plan.new = _apply(lines, edits, dominant_newline(plan.old))
    return plan


def plan_rewrite(path: Path, code: UpstreamCode | None = None) -> list[FileRewrite]:
    """Plan the rewrite of the diffusers tree at `path`: one `FileRewrite` per file considered, nothing written."""
    code = code or upstream_code()
    package, root = diffusers_tree(path)
    plans = [plan_module(module, code) for module in sorted((package / AUTOENCODERS).glob("*.py"))]
    plans = [
        plan
        for plan in plans
        if plan.rewritten or plan.up_to_date or plan.skipped or plan.nested or plan.path.stem == VAE_MODULE
    ]
    if not any(plan.rewritten or plan.up_to_date for plan in plans):
        raise RewriteError(f"no loop blend methods found under {package / AUTOENCODERS}")
    plans = [plan_vae(plan, code) if plan.path.stem == VAE_MODULE else plan for plan in plans]
    for plan in plans:
        try:
            if plan.changed:
                ast.parse(plan.new)
        except SyntaxError as error:
            raise RewriteError(f"the rewrite of {plan.path} does not parse: {error}") from error
    if root is not None and has_tester_layout(root):
        classes = {name.split(".")[0] for plan in plans for name in [*plan.rewritten, *plan.up_to_date]}
        try:
            edits, _ = plan_test_files(root, classes)
        except TestLayoutError as error:
            raise RewriteError(str(error)) from error
        plans += [
            FileRewrite(path=path, old=old.text, new=new, encoding=old.encoding) for path, (old, new) in edits.items()
        ]
    elif root is not None and (root / TEST_MODULE_PATH).parent.is_dir():
        test_path = root / TEST_MODULE_PATH
        old = read_source(test_path) if test_path.exists() else SourceFile(test_path, "")
        classes = {plan.path.stem: [*plan.rewritten, *plan.up_to_date] for plan in plans}
        new = with_newline(render_test_module(classes), old.newline)
        plans.append(FileRewrite(path=test_path, old=old.text, new=new, encoding=old.encoding))
    return plans


def apply_rewrite(plans: list[FileRewrite]) -> None:
    """Write every changed file, all or nothing (`tileblend.source_files.write_files`), vae.py first so that any
    state the tree is left in (a crash between two replacements) imports; raise `SourceError` if it cannot."""
    changed = sorted((plan for plan in plans if plan.changed), key=lambda plan: plan.path.stem != VAE_MODULE)
    write_files([SourceFile(plan.path, plan.new, plan.encoding) for plan in changed])


def report(plans: list[FileRewrite], package: Path) -> str:
    """What the rewrite does (or did): per file, the methods rewritten, up to date and skipped; then totals."""
    lines = []
    for plan in plans:
        relative = plan.path.relative_to(package) if plan.path.is_relative_to(package) else plan.path
        for label, names in (("rewritten", plan.rewritten), ("up to date", plan.up_to_date)):
            if names:
                lines.append(f"{relative}: {label}: {', '.join(names)}")
        if plan.skipped:
            lines.append(f"{relative}: skipped (named like a blend, not the loop): {', '.join(plan.skipped)}")
        if plan.nested:
            lines.append(
                f"{relative}: skipped (a loop in a nested class, where a copy cannot be checked): "
                f"{', '.join(plan.nested)}"
            )
        if plan.path.stem == VAE_MODULE and plan.path.parent.name == "autoencoders":
            lines.append(f"{relative}: blend_tiles and {SOURCE_CLASS}.blend_v/h/t: {_state(plan)}")
        elif not (plan.rewritten or plan.up_to_date or plan.skipped or plan.nested):
            lines.append(f"{relative}: test module: {_state(plan)}")
    copies = [plan for plan in plans if plan.rewritten or plan.up_to_date]
    methods = sum(len(plan.rewritten) + len(plan.up_to_date) for plan in copies)
    rewritten = sum(len(plan.rewritten) for plan in plans)
    skipped = [name for plan in plans for name in plan.skipped + plan.nested]
    lines.append(
        f"{methods} blend methods in {len(copies)} files ({rewritten} rewritten, {methods - rewritten} up to date), "
        f"{len(skipped)} skipped, {sum(plan.changed for plan in plans)} files changed"
    )
    return "\n".join(lines)


def _state(plan: FileRewrite) -> str:
    return "up to date" if not plan.changed else "written" if plan.old else "created"


def unified_diff(plans: list[FileRewrite], base: Path) -> str:
    """The changes as a unified diff with paths relative to `base` (applies with `git apply` there). Lines keep their
    own endings, and a file's BOM is part of its first line."""
    patches = []
    for plan in plans:
        if plan.changed:
            name = plan.path.relative_to(base).as_posix()
            bom = "\ufeff" if plan.encoding == "utf-8-sig" else ""
            old = split_lines(bom + plan.old if plan.old else "")
            new = split_lines(bom + plan.new)
            patches += difflib.unified_diff(
                old, new, fromfile=f"a/{name}" if plan.old else "/dev/null", tofile=f"b/{name}"
            )
    return "".join(patches)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "rewrite",
        help="write the vectorized blend into a diffusers source tree (the upstream pull request)",
        description="Replace every diffusers loop blend under PATH by a copy of AutoencoderMixin.blend_v/h/t "
        "(models/autoencoders/vae.py), generated from tileblend.blend. Needs diffusers 0.36.0 or later. Exit codes: 0 "
        "done, 1 a rewrite is pending (--check), 2 error (the message says whether anything was written).",
    )
    parser.add_argument("path", type=Path, help="a diffusers checkout (with src/diffusers/) or package directory")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="change nothing; exit 1 if a rewrite is pending")
    mode.add_argument("--diff", action="store_true", help="print a unified diff instead of writing")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Plan, report and (unless --check or --diff) write the rewrite of `args.path`."""
    try:
        plans = plan_rewrite(args.path)
        package, root = diffusers_tree(args.path)
        if args.diff:
            sys.stdout.flush()  # bytes, so that no platform translates the lines' own endings
            sys.stdout.buffer.write(unified_diff(plans, root or package.parent).encode("utf-8"))
            sys.stdout.buffer.flush()
            return 0
        if not args.check:
            apply_rewrite(plans)
    except (SourceError, OSError) as error:
        print(f"tileblend rewrite: error: {error}", file=sys.stderr)
        return 2
    print(report(plans, package))
    if args.check:
        pending = [str(plan.path) for plan in plans if plan.changed]
        if pending:
            print(f"rewrite pending in {len(pending)} files: {', '.join(pending)}", file=sys.stderr)
            return 1
    return 0
