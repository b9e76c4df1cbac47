"""The journal of a write (`tileblend.upstream.transaction`): what it lists, how it is written, and how it is checked.

The journal, `.tileblend-transaction.json` at the top of the tree, lists the files of one write, relative to the tree,
whether each existed and the SHA-256 of its new content, with the write's phase and random id. It is always written
aside and renamed into place, so it is never seen cut short.

A journal is read from the tree, and a tree can come from anyone (a tarball, a branch): recovery trusts it no more
than any other file there. `read_journal` accepts only a journal this user's tileblend signed (an HMAC-SHA256 with a
key kept outside every tree, `journal_key`), in this format, with an id tileblend makes, and whose every path is a
plain relative path to a Python file inside the tree, reached through no link, with temporary files that are regular
files or none. Anything else raises `JournalRefused`, and nothing is touched.
"""

import hashlib
import hmac
import json
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from .source_files import SourceError


JOURNAL = ".tileblend-transaction.json"
JOURNAL_ASIDE = f"{JOURNAL}.tmp"
JOURNAL_FORMAT = "tileblend transaction 3"
PHASES = ("staging", "replacing", "committed")
TRANSACTION_ID_BYTES = 4
TRANSACTION_ID = re.compile(f"[0-9a-f]{{{2 * TRANSACTION_ID_BYTES}}}")
"""A transaction's id, `secrets.token_hex(TRANSACTION_ID_BYTES)`: it names the temporary files, so nothing else is
accepted from a journal."""
DIGEST = re.compile("[0-9a-f]{64}")
KEY_BYTES = 32
MAX_JOURNAL_BYTES = 1 << 20
"""A journal lists each file once, in about a hundred bytes: a larger one is not tileblend's."""
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f]")
"""Never in a path tileblend writes; in a message they could fake lines or drive the terminal."""


class JournalRefused(SourceError):
    """A journal that recovery does not trust: it is left as it is, and so is every other file."""


@dataclass(frozen=True)
class Entry:
    """One file of a transaction: where it is and the paths of its staged new content and backup."""

    target: Path
    existed: bool
    digest: str  # SHA-256 of the new content: a file is put back only while it still holds what the write wrote
    new: Path
    orig: Path


def entries(tree: Path, transaction: str, files: list[tuple[str, bool, str]]) -> list[Entry]:
    """The entries of the files (path relative to `tree`, existed, digest) of the transaction `transaction`."""
    found = []
    for relative, existed, digest in files:
        target = tree / relative
        prefix = target.parent / f".{target.name}.tileblend-{transaction}"
        found.append(Entry(target, existed, digest, Path(f"{prefix}.new"), Path(f"{prefix}.orig")))
    return found


def has_journal(tree: Path) -> bool:
    """Whether `tree` holds a journal, of any kind (a link, a FIFO: recovery refuses those, it does not skip them)."""
    return os.path.lexists(tree / JOURNAL)


def refuse_pending(tree: Path, remedy: str) -> None:
    """For a command that reads `tree` but does not recover a killed write (`tileblend rewrite --check`/`--diff`, the
    copy checker without `--fix_and_overwrite`): raise when `tree` holds a journal, `JournalRefused` for one that
    `read_journal` refuses (`remedy` would refuse it too), else `SourceError` saying that `remedy`, a command, finishes
    the write. Touches nothing."""
    tree = Path(os.path.realpath(tree))  # as recovery reads it: the journal's paths are checked against it
    if has_journal(tree):
        phase, _ = read_journal(tree)
        done = "removes its backups" if phase == "committed" else "rolls it back"
        raise SourceError(f"{tree / JOURNAL}: a write was interrupted; {remedy} {done}")


def journal_key() -> bytes:
    """This user's key for signing journals, made on first use: `$XDG_STATE_HOME/tileblend/journal.key` (by default
    `~/.local/state/tileblend/journal.key`), readable by the user only. Outside every tree, so a tree cannot bring a
    journal recovery accepts."""
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "tileblend"
    path = state / "journal.key"
    if not path.exists():
        state.mkdir(parents=True, exist_ok=True, mode=0o700)
        aside = state / f"journal.key.{secrets.token_hex(TRANSACTION_ID_BYTES)}"
        descriptor = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(secrets.token_bytes(KEY_BYTES))
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(aside, path)  # whole, and the first of two processes making it at once wins
        except FileExistsError:
            pass
        finally:
            os.unlink(aside)
    return path.read_bytes()


def _signature(state: dict, key: bytes) -> str:
    fields = {name: value for name, value in state.items() if name != "mac"}
    return hmac.new(key, json.dumps(fields, sort_keys=True).encode(), hashlib.sha256).hexdigest()


def write_journal(tree: Path, transaction: str, phase: str, written: list[Entry]) -> None:
    """Write the signed journal whole: aside (a file or link left at that name is removed, never followed), then
    renamed over the old one."""
    files = [[entry.target.relative_to(tree).as_posix(), entry.existed, entry.digest] for entry in written]
    state = {"format": JOURNAL_FORMAT, "id": transaction, "phase": phase, "files": files}
    state["mac"] = _signature(state, journal_key())
    aside = tree / JOURNAL_ASIDE
    try:
        os.unlink(aside)
    except FileNotFoundError:
        pass
    descriptor = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(descriptor, "wb") as file:
        file.write(json.dumps(state).encode())
        file.flush()
        os.fsync(file.fileno())
    os.replace(aside, tree / JOURNAL)


def read_journal(tree: Path) -> tuple[str, list[Entry]]:
    """The phase and entries of the journal in `tree`, once it passed every check the module names.

    Raises `JournalRefused`, naming the journal and the first check it fails; touches nothing."""
    journal = tree / JOURNAL

    def refuse(reason: str) -> JournalRefused:
        return JournalRefused(
            f"refused {journal}: {reason}; nothing was touched (docs/upstream-pr.md says what to do)"
        )

    def file_kind(path: Path) -> int | None:
        try:
            return stat.S_IFMT(os.lstat(path).st_mode)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise refuse(f"cannot look at {path.name!r}: {error.strerror}") from None

    if file_kind(journal) != stat.S_IFREG:
        raise refuse("it is not a regular file")
    if os.lstat(journal).st_size > MAX_JOURNAL_BYTES:
        raise refuse(f"it is larger than {MAX_JOURNAL_BYTES} bytes")
    try:
        state = json.loads(journal.read_bytes())
    except (ValueError, RecursionError):
        raise refuse("it is not JSON (cut short, or not written by tileblend)") from None
    if not isinstance(state, dict) or sorted(state) != ["files", "format", "id", "mac", "phase"]:
        raise refuse("it does not hold a journal's keys (format, id, phase, files, mac)")
    if state["format"] != JOURNAL_FORMAT:
        raise refuse(f"its format is {state['format']!r:.80}, not {JOURNAL_FORMAT!r} (another version of tileblend?)")
    if not (isinstance(state["mac"], str) and hmac.compare_digest(state["mac"], _signature(state, journal_key()))):
        raise refuse("it is not signed with this user's key (it came with the tree, or another user wrote it)")
    if not (isinstance(state["id"], str) and TRANSACTION_ID.fullmatch(state["id"])):
        raise refuse(f"its id {state['id']!r:.80} is not one tileblend makes")
    if state["phase"] not in PHASES:
        raise refuse(f"its phase {state['phase']!r:.80} is not one of {', '.join(PHASES)}")
    files = state["files"]
    if not isinstance(files, list) or not all(
        isinstance(item, list)
        and len(item) == 3
        and isinstance(item[0], str)
        and isinstance(item[1], bool)
        and isinstance(item[2], str)
        and DIGEST.fullmatch(item[2])
        for item in files
    ):
        raise refuse("its files are not a list of [path, existed, SHA-256]")
    listed = entries(tree, state["id"], files)
    for (relative, _, _), entry in zip(files, listed):
        parts = relative.split("/")
        if (
            relative.startswith("/")
            or CONTROL_CHARACTERS.search(relative)
            or any(part in ("", ".", "..") or "\\" in part for part in parts)
        ):
            raise refuse(f"the path {relative!r:.200} is not a plain relative path inside the tree")
        if not relative.endswith(".py"):
            raise refuse(f"the path {relative!r:.200} is not a Python file (the only files tileblend writes)")
        for path in (entry.target, entry.new, entry.orig):
            if file_kind(path) not in (None, stat.S_IFREG):
                raise refuse(f"{path} is not a regular file")
        resolved = Path(os.path.realpath(entry.target))
        if resolved != entry.target:
            where = "leads out of the tree" if not resolved.is_relative_to(tree) else "passes through a link"
            raise refuse(f"the path {relative!r} {where} ({resolved})")
    if len({entry.target for entry in listed}) != len(listed):
        raise refuse("it lists a file twice")
    return state["phase"], listed
