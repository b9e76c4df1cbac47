"""`make upstream-snapshot`: upstream diffusers main at the pinned commit, for the tests that judge the rewrite there.

    python utils/upstream_snapshot.py            # download from GitHub, check, write upstream-snapshot/diffusers-main.tar.gz
    python utils/upstream_snapshot.py --url URL  # another source of the same archive (file:// included)

GitHub's archive of the commit (`diffusers-<commit>/...`, with the commit id in its pax header, as `git archive` writes
it) is checked: the commit id, and the files the upstream check needs. The parts an upstream pull request is judged by
(`PARTS`: the sources, upstream's tools and its autoencoder tests) are written under `diffusers/` into
`upstream-snapshot/diffusers-main.tar.gz`, which the tests find (tests/conftest.py), as does `make upstream-check
DIFFUSERS=upstream-snapshot/diffusers-main.tar.gz`. Without network, it says in one line where to save the archive
downloaded elsewhere; a rerun then checks and unpacks that file.
"""

import argparse
import io
import sys
import tarfile
import urllib.request
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
COMMIT = "58eb52c0803ea9af3abec60841c2a093bdf1f951"
URL = f"https://github.com/huggingface/diffusers/archive/{COMMIT}.tar.gz"
FOLDER = ROOT / "upstream-snapshot"
SNAPSHOT_NAME = "diffusers-main.tar.gz"
DOWNLOAD_NAME = f"diffusers-{COMMIT}.tar.gz"
PARTS = (
    ".ai/",
    "LICENSE",
    "Makefile",
    "docs/source/en/conceptual/contribution.md",
    "docs/source/en/conceptual/philosophy.md",
    "pyproject.toml",
    "setup.py",
    "src/",
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/testing_utils.py",
    "tests/models/__init__.py",
    "tests/models/autoencoders/",
    "tests/models/testing_utils/",
    "utils/",
)
"""The files and folders (ending in /) of the upstream tree that the snapshot keeps."""
REQUIRED = (
    "src/diffusers/models/autoencoders/vae.py",
    "utils/check_copies.py",
    "tests/models/autoencoders/testing_utils.py",
    "pyproject.toml",
)
"""Files without which the upstream check cannot run: an archive that lacks one is not the tree it needs."""


class SnapshotError(Exception):
    """An archive that is not upstream diffusers at `COMMIT`, or a download that failed (one line)."""


def kept(name: str) -> bool:
    """Whether the path `name` (relative to the tree's root) belongs to `PARTS`."""
    return any(name == part or (part.endswith("/") and (name + "/").startswith(part)) for part in PARTS)


def repack(archive: Path, snapshot: Path) -> int:
    """Check `archive` (GitHub's archive of `COMMIT`) and write its `PARTS` under `diffusers/` into `snapshot`, with the
    commit in the pax header; returns the number of files written. Nothing is written when the check fails.

    Raises:
        SnapshotError: not a readable .tar.gz, another commit, an unsafe member (a link or path out of the tree), or
            a `REQUIRED` file missing.
    """
    partial = snapshot.with_name(snapshot.name + ".partial")
    try:
        with tarfile.open(archive, "r:gz") as source:
            if source.pax_headers.get("comment") != COMMIT:
                found = source.pax_headers.get("comment") or "none"
                raise SnapshotError(f"{archive} is not diffusers at {COMMIT[:7]} (its commit: {found})")
            files = set()
            with tarfile.open(partial, "w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": COMMIT}) as out:
                for member in source:
                    top, _, name = member.name.partition("/")
                    if not name or not kept(name.rstrip("/")):
                        continue
                    try:
                        tarfile.data_filter(member, "/tree")
                    except tarfile.FilterError as error:
                        raise SnapshotError(f"{archive}: unsafe member {member.name} ({error})") from error
                    copy = member.replace(name=f"diffusers/{name}", deep=False)
                    copy.pax_headers = {}  # the archive's own long path, which would win over the new name
                    if member.isfile():
                        files.add(name)
                        out.addfile(copy, io.BytesIO(source.extractfile(member).read()))
                    elif member.isdir():
                        out.addfile(copy)
    except (OSError, EOFError, tarfile.TarError) as error:
        partial.unlink(missing_ok=True)
        raise SnapshotError(f"{archive}: cannot read it as a .tar.gz ({error})") from error
    except SnapshotError:
        partial.unlink(missing_ok=True)
        raise
    missing = [name for name in REQUIRED if name not in files]
    if missing:
        partial.unlink()
        raise SnapshotError(f"{archive} lacks {', '.join(missing)}: not the diffusers tree the upstream check needs")
    partial.replace(snapshot)
    return len(files)


def check_snapshot(snapshot: Path) -> int:
    """The number of files of the snapshot `snapshot` that `repack` wrote, checked as `repack` checks an archive.

    Raises:
        SnapshotError: it is not such a snapshot (unreadable, another commit, a `REQUIRED` file missing).
    """
    try:
        with tarfile.open(snapshot, "r:gz") as archive:
            commit = archive.pax_headers.get("comment")
            files = {member.name.removeprefix("diffusers/") for member in archive if member.isfile()}
    except (OSError, EOFError, tarfile.TarError) as error:
        raise SnapshotError(f"{snapshot}: cannot read it as a .tar.gz ({error}); delete it and rerun") from error
    missing = [name for name in REQUIRED if name not in files]
    if commit != COMMIT or missing:
        raise SnapshotError(f"{snapshot} is not the snapshot of diffusers at {COMMIT[:7]}: delete it and rerun")
    return len(files)


def download(url: str, target: Path) -> None:
    """Save `url` as `target` (through a partial file, so that an interrupted download leaves nothing behind).

    Raises:
        SnapshotError: the download failed (no network, an HTTP error).
    """
    partial = target.with_name(target.name + ".partial")
    try:
        with urllib.request.urlopen(url, timeout=30) as response, partial.open("wb") as out:
            while chunk := response.read(1 << 20):
                out.write(chunk)
    except (OSError, ValueError) as error:
        partial.unlink(missing_ok=True)
        raise SnapshotError(
            f"cannot download {url} ({getattr(error, 'reason', error)}); without network, download it elsewhere and "
            f"save it as {target}, then rerun make upstream-snapshot"
        ) from error
    partial.replace(target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=URL, help="where to download GitHub's archive of the commit from")
    parser.add_argument(
        "--folder", type=Path, default=FOLDER, help="where to write the snapshot (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    args.folder.mkdir(parents=True, exist_ok=True)
    archive, snapshot = args.folder / DOWNLOAD_NAME, args.folder / SNAPSHOT_NAME
    downloaded = False
    try:
        if snapshot.is_file() and not archive.is_file():
            count = check_snapshot(snapshot)
        else:
            downloaded = not archive.is_file()
            if downloaded:
                print(f"upstream-snapshot: downloading {args.url}", file=sys.stderr, flush=True)
                download(args.url, archive)
            count = repack(archive, snapshot)
            archive.unlink()
    except SnapshotError as error:
        if downloaded:  # a file saved by hand is the user's to delete
            archive.unlink(missing_ok=True)
        print(f"upstream-snapshot: {error}", file=sys.stderr)
        return 1
    print(f"upstream-snapshot: {snapshot}: diffusers at {COMMIT[:7]}, {count} files (checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
