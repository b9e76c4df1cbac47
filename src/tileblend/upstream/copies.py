"""Check (or fix) the code that diffusers marks `# Copied from diffusers.<module>.<Object>[.<method>]`.

    python utils/check_copies.py [--path ROOT] [--fix_and_overwrite]

(a thin entry point to this module, with tileblend installed as `make install` does: files are read through
`tileblend.upstream.source_files` and written through `tileblend.upstream.transaction`, like `tileblend rewrite` does:
a fix first rolls back a write that was killed.)
ROOT is a diffusers checkout (the code under ROOT/src/diffusers is scanned) or a diffusers package directory; the
default is the current directory. Any other ROOT is an error (exit 2): this repository holds no copies.

Why this exists beside diffusers' own `utils/check_copies.py`: that one runs only from a checkout's root, so this
one serves trees without it (an installed diffusers package, which the tests rewrite) and keeps their bytes (CRLF,
BOM, all-or-nothing writes). A checkout's `make fix-copies DIFFUSERS=path` runs the checkout's own checker, and `make
upstream-check` runs it too. `tileblend rewrite` owns the text of tileblend's copies (vae.py's
`AutoencoderMixin.blend_v/h/t`, and every copy of those methods): it writes them from one source in one step, and a
rerun refreshes them; `tileblend.upstream.pr` runs this checker in check mode after the rewrite. The format and the
comparison are diffusers' own:

- The comment sits directly above the `def`/`class` of the copy (decorators go above the comment), and may end with
  `with A->B, C->D`: regular-expression substitutions applied to the compared source lines (`all-casing` after a
  pattern also applies its lower- and upper-case forms). With patterns, those lines are formatted with `ruff format`
  (under the source's own first line) and the pyproject.toml found in ROOT (line length 119 when there is none).
- The module is the shortest dotted prefix of the target that is a file under the package; the rest names a
  `class`/`def` per level, each one indented 4 spaces more than the previous.
- Only what follows the first line of the definition is compared (the body, and the rest of a multi-line signature);
  "Copied from" lines inside the source are ignored; a copy ends where its indentation ends or at `# End copy`.

Check mode lists every copy that differs from its source (`file:line: ... differs from diffusers.X`) and exits 1.
Files are read as Python reads source (a UTF-8 BOM is fine) and compared regardless of line endings; a fixed file keeps
its encoding and line endings, the lines the fix writes taking the file's dominant ending. Fix mode rewrites those
copies from their sources (repeating until copies of copies agree) and writes the changed files all or nothing: if
one cannot be written, the ones written before it are put back. Unlike diffusers' own script, copies that cannot be
fixed safely are errors, reported before anything is written (exit 2): a source and a copy at different depths (a
module function copied into a class, which diffusers' fixer answers by overwriting the rest of the class), a target
that does not resolve, a pattern whose result ruff cannot format, or a fix that leaves a file that does not parse.
"""

import argparse
import ast
import io
import re
import subprocess
import sys
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path

from .edits import LINE_LENGTH
from .journal import refuse_pending
from .source_files import (
    COPIED_FROM,
    SourceError,
    SourceFile,
    find_package,
    normalize_newlines,
    one_name_per_file,
    read_source,
    split_lines,
    with_newline,
)
from .transaction import interruption, recover, transaction_root, write_files


REPLACE_PATTERN = re.compile(r"^\s*(\S+)->(\S+)(\s+.*|$)")
SIGNATURE_END = re.compile(r"^\s*\)(\s*->.*:|:)\s*$")
MAX_FIX_PASSES = 10


class CopyError(Exception):
    """A copy that cannot be checked or fixed safely."""


@dataclass(frozen=True)
class Copy:
    """One marked copy: where its comment is, what it copies, and the lines its compared text spans."""

    path: Path
    comment: int  # index of the comment line
    target: str  # the dotted name after `diffusers.`
    patterns: str  # what follows the target, e.g. "with A->B"
    start: int  # index of the first compared line
    end: int  # index after the last compared line

    def location(self) -> str:
        return f"{self.path}:{self.comment + 1}"


def _continues(line: str, indent: str) -> bool:
    """Whether `line` still belongs to a block whose body is indented by `indent`."""
    return line.startswith(indent) or not line.strip() or SIGNATURE_END.match(line) is not None


def _block_end(lines: list[str], start: int, indent: str) -> int:
    """Index after the block body starting at `start` (indented `indent`), trailing blank lines excluded."""
    end = start + 1
    while end < len(lines) and _continues(lines[end], indent) and not lines[end].startswith(f"{indent}# End copy"):
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return end


def _comment_lines(text: str, path: Path) -> set[int]:
    """Indices of the lines of `text` that hold a comment token."""
    try:
        tokens = tokenize.generate_tokens(io.StringIO(text).readline)
        return {token.start[0] - 1 for token in tokens if token.type == tokenize.COMMENT}
    except (tokenize.TokenError, SyntaxError) as error:
        raise CopyError(f"cannot tokenize {path}: {error}") from error


class Tree:
    """The files of a diffusers package, read once and edited in memory (line endings as stored)."""

    def __init__(self, package: Path, ruff_config: Path | None):
        self.package = package
        self.ruff_config = ruff_config
        self.sources: dict[Path, SourceFile] = {}  # as read
        self.texts: dict[Path, str] = {}
        self._lines: dict[Path, list[str]] = {}
        self._resolved: dict[str, tuple[list[str], int]] = {}

    def lines(self, path: Path) -> list[str]:
        """The current lines of `path` (read on first use); do not modify the list."""
        if path not in self._lines:
            self.sources[path] = read_source(path)  # its SourceError says nothing was written
            self.set_text(path, self.sources[path].text)
        return self._lines[path]

    def set_text(self, path: Path, text: str) -> None:
        self.texts[path] = text
        self._lines[path] = split_lines(text)
        self._resolved.clear()

    def files(self) -> list[Path]:
        return sorted(self.package.rglob("*.py"))

    def copies(self, path: Path) -> list[Copy]:
        """Every marked copy in `path`. A marker not followed by a definition is an error when it is a real comment,
        and ignored when it is text in a string."""
        lines = self.lines(path)
        copies = []
        for index, line in enumerate(lines):
            match = COPIED_FROM.match(line)
            if match is None:
                continue
            indent, target, patterns = match.groups()
            if index + 1 >= len(lines) or not re.match(rf"{indent}(async def|def|class)\s", lines[index + 1]):
                if index not in _comment_lines(self.texts[path], path):
                    continue
                raise CopyError(f"{path}:{index + 1}: no definition directly below `# Copied from diffusers.{target}`")
            body_indent = indent + "    "
            copies.append(Copy(path, index, target, patterns, index + 2, _block_end(lines, index + 1, body_indent)))
        return copies

    def resolve(self, target: str) -> tuple[list[str], int]:
        """The lines of the module holding `target` and the index of its `def`/`class` line."""
        if target not in self._resolved:
            self._resolved[target] = self._find(target)
        return self._resolved[target]

    def _find(self, target: str) -> tuple[list[str], int]:
        parts = target.split(".")
        for split in range(1, len(parts)):
            path = self.package.joinpath(*parts[:split]).with_suffix(".py")
            if path.is_file():
                break
        else:
            raise CopyError(f"no module of diffusers.{target} under {self.package}")
        lines = self.lines(path)
        index, indent = 0, ""
        for name in parts[split:]:
            pattern = re.compile(rf"^{indent}(class|def)\s+{re.escape(name)}(\(|:)")
            while index < len(lines) and pattern.match(lines[index]) is None:
                index += 1
            if index == len(lines):
                raise CopyError(f"diffusers.{target} not found in {path}")
            indent += "    "
            index += 1
        return lines, index - 1

    def source_text(self, copy: Copy) -> str | tuple[str, int]:
        """What the copy's compared lines must be: the source's lines, or, when the copy has patterns, the
        substituted lines still to be formatted (a module text whose first `depth` lines are to be dropped)."""
        lines, definition = self.resolve(copy.target)
        copy_line = self.lines(copy.path)[copy.comment]
        copy_indent = copy_line[: len(copy_line) - len(copy_line.lstrip())]
        indent = lines[definition][: len(lines[definition]) - len(lines[definition].lstrip())]
        if indent != copy_indent:
            raise CopyError(
                f"{copy.location()}: diffusers.{copy.target} is at depth {len(indent) // 4}, its copy at depth "
                f"{len(copy_indent) // 4}; diffusers' checker would overwrite the code after the copy"
            )
        end = _block_end(lines, definition, indent + "    ")
        body = normalize_newlines("".join(line for line in lines[definition + 1 : end] if not COPIED_FROM.match(line)))
        if not copy.patterns.strip():
            return body
        for pattern in copy.patterns.strip().removeprefix("with").split(","):
            match = REPLACE_PATTERN.match(pattern)
            if match is None:
                continue
            old, new, option = match.groups()
            body = re.sub(old, new, body)
            if option.strip() == "all-casing":
                body = re.sub(old.lower(), new.lower(), body)
                body = re.sub(old.upper(), new.upper(), body)
        # Formatted under the source's own first line, nested in classes to the copy's depth; that line and the
        # classes are dropped afterwards.
        depth = len(indent) // 4
        wrapper = "".join(f"{'    ' * level}class _:\n" for level in range(depth))
        return wrapper + normalize_newlines(lines[definition]) + body, depth + 1

    def format_all(self, requests: dict[Copy, tuple[str, int]]) -> dict[Copy, str]:
        """Format every request with one `ruff format` run; return each text without its first lines."""
        if not requests:
            return {}
        copies = list(requests)
        with tempfile.TemporaryDirectory() as directory:
            for number, copy in enumerate(copies):
                Path(directory, f"{number}.py").write_text(requests[copy][0], encoding="utf-8")
            options = ["--config", str(self.ruff_config)] if self.ruff_config else ["--line-length", str(LINE_LENGTH)]
            result = subprocess.run(
                [sys.executable, "-m", "ruff", "format", "--no-cache", *options, directory],
                capture_output=True,
                text=True,
            )
            if result.returncode != 0:
                failed = re.search(r"(\d+)\.py", result.stderr)
                culprit = copies[int(failed.group(1))] if failed else copies[0]
                raise CopyError(
                    f"{culprit.location()}: ruff cannot format diffusers.{culprit.target} after "
                    f"`{culprit.patterns.strip()}`"
                )
            return {
                copy: "".join(
                    Path(directory, f"{number}.py")
                    .read_text(encoding="utf-8")
                    .splitlines(keepends=True)[requests[copy][1] :]
                )
                for number, copy in enumerate(copies)
            }

    def mismatches(self, files: list[Path]) -> list[tuple[Copy, str]]:
        """(copy, expected text) for every copy in `files` that differs from its source, in file order."""
        expected, requests = {}, {}
        for path in files:
            for copy in self.copies(path):
                text = self.source_text(copy)
                if isinstance(text, str):
                    expected[copy] = text
                else:
                    requests[copy] = text
        expected.update(self.format_all(requests))
        found = []
        for copy in sorted(expected, key=lambda copy: (str(copy.path), copy.comment)):
            if normalize_newlines("".join(self.lines(copy.path)[copy.start : copy.end])) != expected[copy]:
                found.append((copy, expected[copy]))
        return found

    def fix(self, mismatches: list[tuple[Copy, str]]) -> None:
        """Rewrite the given copies in memory, each from its expected text in its file's dominant line ending."""
        for copy, expected in sorted(mismatches, key=lambda item: (str(item[0].path), -item[0].comment)):
            lines = list(self.lines(copy.path))
            lines[copy.start : copy.end] = split_lines(with_newline(expected, self.sources[copy.path].newline))
            self.set_text(copy.path, "".join(lines))


def check(root: Path, fix: bool) -> int:
    """Check (or fix) every copy under `root`; print what differs; return the exit code."""
    if not root.is_dir():
        raise CopyError(f"{root} is not a directory")
    located = find_package(root)
    if located is None:
        raise CopyError(f"{root} is not a diffusers checkout (no src/diffusers/) or diffusers package directory")
    tree_root = transaction_root(located[0])
    if not fix:
        refuse_pending(tree_root, "--fix_and_overwrite")
    elif found := recover(tree_root):
        print(found)
    config = root / "pyproject.toml" if (root / "pyproject.toml").is_file() else None
    tree = Tree(located[0], config)
    files = tree.files()
    original = {path: "".join(tree.lines(path)) for path in files}
    found = tree.mismatches(files)
    for copy, _ in found:
        print(f"{copy.location()}: copy differs from diffusers.{copy.target}")
    if not fix:
        if found:
            print(f"{len(found)} copies differ from their source; run `make fix-copies` to fix them")
        return 1 if found else 0
    mismatches = found
    for _ in range(MAX_FIX_PASSES):
        if not mismatches:
            break
        tree.fix(mismatches)
        mismatches = tree.mismatches(files)  # copies of fixed copies
    else:
        raise CopyError(f"copies still differ after {MAX_FIX_PASSES} passes (circular copies?)")
    changed = [path for path in files if tree.texts[path] != original[path]]
    one_name_per_file(changed)
    for path in changed:
        try:
            ast.parse(tree.texts[path], filename=str(path))
        except SyntaxError as error:
            raise CopyError(f"fixing {path} would leave it unparsable (line {error.lineno}: {error.msg})") from error
    read_as = [tree.sources[path].encoded() for path in changed]  # a file edited meanwhile stops the write
    files_to_write = [SourceFile(path, tree.texts[path], tree.sources[path].encoding) for path in changed]
    write_files(files_to_write, read_as, tree=tree_root)
    print(f"fixed {len(found)} copies in {len(changed)} files")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, default=Path("."), help="diffusers checkout or package directory")
    parser.add_argument("--fix_and_overwrite", action="store_true", help="rewrite the copies that differ")
    args = parser.parse_args(argv)
    try:
        return check(args.path, args.fix_and_overwrite)
    except CopyError as error:
        print(f"check_copies: error: {error}; nothing was written", file=sys.stderr)
        return 2
    except (SourceError, OSError) as error:  # its message says what was written
        print(f"check_copies: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:
        outcome, code = interruption(interrupt)
        print(f"check_copies: {outcome}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
