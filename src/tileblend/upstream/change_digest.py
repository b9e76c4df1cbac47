"""The fingerprint of a rewrite: the files it changes and their bytes, so that evidence gathered on one rewritten
checkout (a `make gpu-check UPSTREAM=...` run) can be matched to the rewrite `make upstream-pr` writes."""

import hashlib


def change_digest(files: dict[str, bytes]) -> str:
    """The SHA-256 of `files` (path relative to the checkout, as POSIX -> the bytes the rewrite gives it)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.encode() + b"\0" + files[path] + b"\0")
    return digest.hexdigest()


def planned_change(rewrite, inherit: bool) -> dict:
    """What a planned rewrite (`tileblend.upstream.rewrite.TreeRewrite`) changes: the tree's diffusers version, the
    layout, and the count and fingerprint of the files it changes (their bytes as the rewrite writes them)."""
    root = (rewrite.root or rewrite.package).resolve()
    files = {
        plan.path.resolve().relative_to(root).as_posix(): plan.new.encode(plan.encoding)
        for plan in rewrite.files
        if plan.changed
    }
    layout = "inherit" if inherit else "copies"
    return {"version": rewrite.version, "layout": layout, "files": len(files), "digest": change_digest(files)}
