"""The fingerprint of a rewrite: the files it changes and their bytes, so that evidence gathered on one rewritten
checkout (a `make gpu-check UPSTREAM=...` run) can be matched to the rewrite `make upstream-pr` writes."""

import hashlib


def change_digest(files: dict[str, bytes]) -> str:
    """The SHA-256 of `files` (path relative to the checkout, as POSIX -> the bytes the rewrite gives it)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.encode() + b"\0" + files[path] + b"\0")
    return digest.hexdigest()
