"""`tileblend rewrite PATH`: write the vectorized blend into a diffusers source tree, as an upstream pull request.

`blend_v`, `blend_h` and `blend_t` go into `models/autoencoders/vae.py` as self-contained methods of `AutoencoderMixin`
(text from `tileblend.upstream.blend_methods`). Every method that `tileblend.recognize` identifies as the row loop (the
recogniser `tileblend.enable()` uses) is replaced in place by

    # Copied from diffusers.models.autoencoders.vae.AutoencoderMixin.blend_X
    <the AutoencoderMixin method, same text>

(no import changes). With `--inherit` the loops of classes that derive from `AutoencoderMixin` are deleted instead, so
that those classes inherit the mixin's methods; only the classes that do not derive from it get copies. The rewriter
owns the text of these copies: it writes the source and every copy from one `UpstreamCode` in one step, so they cannot
disagree, and a rerun refreshes copies written by an earlier run (a second run changes nothing);
`tileblend.upstream.copies` only checks them. Methods named like blends that are neither are left alone and reported,
and so are loops in nested classes (a "Copied from" copy there cannot be checked). In a checkout with upstream's
tester-mixin layout the rewrite adds a tiling-blend tester mixin and a test class per rewritten model; in an older
checkout with `tests/models/autoencoders/` it writes one standalone test module (`tileblend.upstream.test_files`).

This module does the file IO and the command: `plan_rewrite` finds the package, reads each file once and hands its
text to the planners (`tileblend.upstream.model_files` and `.test_files`, text in, `FileRewrite` out); every edit is
computed before anything is written. `apply_rewrite` then writes the files all or nothing, vae.py first
(`tileblend.upstream.transaction.write_files`: a journal lets the next run roll back a write that was killed).
Each file keeps its encoding (a UTF-8 BOM) and its line endings: lines the rewrite adds take the file's dominant
ending.

The tree must have `AutoencoderMixin` in vae.py, as diffusers has since 0.36.0 (`tileblend.enable()` works on older
versions too).
"""

import argparse
import difflib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .blend_methods import SOURCE_CLASS, UpstreamCode, upstream_code
from .edits import RewriteError
from .journal import refuse_pending
from .mixin_bases import check_mixin_bases
from .model_files import VAE_MODULE, FileKind, FileRewrite, MethodId, mixin_methods, plan_module, plan_vae
from .source_files import SourceError, SourceFile, find_package, one_name_per_file, read_source, split_lines
from .test_files import plan_test_files
from .transaction import interruption, recover, transaction_root, write_files


AUTOENCODERS = Path("models", "autoencoders")


@dataclass
class TreeRewrite:
    """The planned rewrite of one diffusers tree: where it is, its version, and one `FileRewrite` per file considered
    (the autoencoder modules with blend methods and vae.py, in name order, then the test files)."""

    package: Path  # the `diffusers` package directory
    root: Path | None  # the checkout root, None for a bare package directory
    version: str  # the package's `__version__`, or "unknown"
    files: list[FileRewrite]


def diffusers_tree(path: Path) -> tuple[Path, Path | None]:
    """Return (the `diffusers` package directory, the checkout root or None) for a checkout or a package dir."""
    found = find_package(path)
    if found is None or not (found[0] / AUTOENCODERS / f"{VAE_MODULE}.py").is_file():
        raise RewriteError(f"{path} is not a diffusers checkout (no src/diffusers/) or diffusers package directory")
    return found


def _version(package: Path) -> str:
    """The `__version__` written in the package's `__init__.py`, or "unknown"."""
    match = re.search(r'^__version__ = "([^"]+)"', read_source(package / "__init__.py").text, re.M)
    return match.group(1) if match else "unknown"


def plan_rewrite(path: Path, code: UpstreamCode | None = None, inherit: bool = False) -> TreeRewrite:
    """Plan the rewrite of the diffusers tree at `path` (nothing written): read each file once, plan it
    (`tileblend.upstream.model_files`; with `inherit`, the loops of classes deriving from `AutoencoderMixin` are
    deleted), then plan the test files. Raises `SourceError` (nothing written) for a tree it cannot rewrite: among
    others, one whose vae.py holds a mixin blend method tileblend did not write, one that binds a name the rewrite
    adds, one where a base class of the mixin defines a blend method, or one where a file it changes is reached under
    two names."""
    code = code or upstream_code()
    package, root = diffusers_tree(path)
    version = _version(package)
    vae_source = read_source(package / AUTOENCODERS / f"{VAE_MODULE}.py")
    earlier = mixin_methods(vae_source)
    check_mixin_bases(vae_source, package, list(code.methods))
    modules = []
    for module in sorted((package / AUTOENCODERS).glob("*.py")):
        if module.stem != VAE_MODULE:
            plan = plan_module(read_source(module), code, inherit, earlier)
            if plan.vectorized or plan.skipped or plan.edited or plan.nested:
                modules.append(plan)
    modules = sorted([*modules, plan_vae(vae_source, code, version, inherit)], key=lambda plan: plan.path)
    if not any(plan.vectorized for plan in modules):
        raise RewriteError(f"no loop blend methods found under {package / AUTOENCODERS}")
    vae = next(plan for plan in modules if plan.kind is FileKind.VAE)
    if not inherit and vae.mixin_written and not any(plan.derived for plan in modules):
        raise RewriteError(
            f"{path} is rewritten in the --inherit layout: no class deriving from {SOURCE_CLASS} has a loop or an "
            "unedited copy left, and nothing in the tree says which had one; rewrite it with --inherit, or start from a pristine "
            "checkout; nothing was written"
        )
    tests = plan_test_files(root, modules) if root is not None else []
    one_name_per_file([plan.path for plan in modules + tests if plan.changed])
    return TreeRewrite(package, root, version, modules + tests)


def apply_rewrite(rewrite: TreeRewrite) -> None:
    """Write every changed file, all or nothing (`tileblend.upstream.transaction.write_files`), vae.py first so that
    any state the tree is left in (a crash between two replacements) imports; raise `SourceError` if it cannot, if a
    file changed since the rewrite was planned (an edit made meanwhile is kept), or if a file is a symbolic link out of
    the tree (writes stay inside the tree the user named); nothing is written then."""
    changed = sorted((plan for plan in rewrite.files if plan.changed), key=lambda plan: plan.kind is not FileKind.VAE)
    read_as = [plan.old.encode(plan.encoding) if plan.existed else None for plan in changed]
    tree = transaction_root(rewrite.package)
    write_files([SourceFile(plan.path, plan.new, plan.encoding) for plan in changed], read_as, tree=tree)


def report(rewrite: TreeRewrite) -> str:
    """What the rewrite does (or did): per file, the methods rewritten, up to date and skipped (a loop replaced or
    deleted whole with a comment inside on a line of its own, naming the comments' lines); then totals."""
    lines = []
    for plan in rewrite.files:
        relative = plan.path.relative_to(rewrite.package) if plan.path.is_relative_to(rewrite.package) else plan.path
        labels = ("rewritten", plan.rewritten), ("up to date", plan.up_to_date), ("deleted (inherited)", plan.deleted)
        for label, names in labels:
            if kept := [name for name in names if name not in plan.dropped]:
                lines.append(f"{relative}: {label}: {_names(kept)}")
            lines += [f"{relative}: {label}{_dropped(plan, [name])}: {name}" for name in names if name in plan.dropped]
        if plan.skipped:
            lines.append(f"{relative}: skipped (named like a blend, not the loop): {_names(plan.skipped)}")
        if plan.edited:
            reason = "under tileblend's Copied from comment, edited since it was written"
            lines.append(f"{relative}: skipped ({reason}): {_names(plan.edited)}")
        if plan.nested:
            reason = "a loop in a nested class, where a copy cannot be checked"
            lines.append(f"{relative}: skipped ({reason}): {_names(plan.nested)}")
        if plan.kind is FileKind.VAE:
            mixin = [name for name in plan.dropped if name.cls == SOURCE_CLASS]
            lines.append(f"{relative}: {SOURCE_CLASS}.blend_v/h/t: {_state(plan)}{_dropped(plan, mixin)}")
        elif plan.kind is FileKind.TESTS:
            lines.append(f"{relative}: test module: {_state(plan)}")
    vectorized = [plan for plan in rewrite.files if plan.vectorized]
    methods = sum(len(plan.vectorized) for plan in vectorized)
    rewritten = sum(len(plan.rewritten) for plan in rewrite.files)
    deleted = sum(len(plan.deleted) for plan in rewrite.files)
    skipped = [name for plan in rewrite.files for name in plan.skipped + plan.edited + plan.nested]
    lines.append(
        f"{methods} blend methods in {len(vectorized)} files ({rewritten} rewritten, {deleted} deleted, "
        f"{methods - rewritten - deleted} up to date), {len(skipped)} skipped, "
        f"{sum(plan.changed for plan in rewrite.files)} files changed"
    )
    return "\n".join(lines)


def _names(methods: list[MethodId]) -> str:
    return ", ".join(map(str, methods))


def _dropped(plan: FileRewrite, names: list[MethodId]) -> str:
    """ " (comments dropped: line N, ...)" for the comments inside the loops `names` the plan replaces, or ""."""
    lines = sorted(line for name in names for line in plan.dropped.get(name, []))
    return f" (comments dropped: line {', '.join(map(str, lines))})" if lines else ""


def _state(plan: FileRewrite) -> str:
    return "up to date" if not plan.changed else "written" if plan.old else "created"


def unified_diff(rewrite: TreeRewrite) -> str:
    """The changes as a unified diff with paths relative to the checkout root (or the package's parent), so that it
    applies with `git apply` there. Lines keep their own endings, and a file's BOM is part of its first line."""
    base = rewrite.root or rewrite.package.parent
    patches = []
    for plan in rewrite.files:
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
    parser.add_argument(
        "--inherit",
        action="store_true",
        help="delete the loops of classes that derive from AutoencoderMixin (they inherit its methods) instead of "
        "copying the methods over them; classes that do not derive from it still get copies",
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Roll back a write that was killed, then plan, report and (unless --check or --diff) write the rewrite of
    `args.path`. Ctrl-C (or SIGTERM, SIGHUP) stops it with one line and exit code 128 + the signal's number."""
    try:
        tree = transaction_root(diffusers_tree(args.path)[0])
        if args.check or args.diff:
            refuse_pending(tree, f"`tileblend rewrite {args.path}`")
        elif found := recover(tree):
            print(f"tileblend rewrite: {found}", file=sys.stderr)
        rewrite = plan_rewrite(args.path, inherit=args.inherit)
        if args.diff:
            sys.stdout.flush()  # bytes, so that no platform translates the lines' own endings
            sys.stdout.buffer.write(unified_diff(rewrite).encode("utf-8"))
            sys.stdout.buffer.flush()
            return 0
        if not args.check:
            apply_rewrite(rewrite)
    except (SourceError, OSError) as error:
        print(f"tileblend rewrite: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:
        outcome, code = interruption(interrupt)
        print(f"tileblend rewrite: {outcome}", file=sys.stderr)
        return code
    print(report(rewrite))
    if args.check:
        pending = [str(plan.path) for plan in rewrite.files if plan.changed]
        if pending:
            print(f"rewrite pending in {len(pending)} files: {', '.join(pending)}", file=sys.stderr)
            return 1
    return 0
