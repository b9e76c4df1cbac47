"""Every relative link in the README and docs/ reaches a file of the repository and, with `#anchor`, a heading of it
(anchors as GitHub makes them: lower case, punctuation dropped but hyphens and underscores, spaces to hyphens)."""

import re
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """The anchors of the headings of `page`, outside code blocks."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    headings = re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_relative_links_reach_a_file_and_heading(page):
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # an absolute URL
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    assert broken == []
