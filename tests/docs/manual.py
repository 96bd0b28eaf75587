"""What the manual's tests read: its pages, their links and headings, as GitHub renders them."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
INDEX = DOCS / "index.md"
README = REPO / "README.md"

_FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def pages() -> list[Path]:
    """Every page of the manual (docs/), the README and ARCHITECTURE.md."""
    return [*sorted(DOCS.rglob("*.md")), README, REPO / "ARCHITECTURE.md"]


def prose(text: str) -> str:
    """The text without fenced blocks and code spans, where brackets are not links."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def code_block(page: Path, after: str, language: str) -> str:
    """The first ```LANGUAGE block on `page` after the text `after` (a heading or a sentence)."""
    text = page.read_text(encoding="utf-8")
    assert after in text, f"{after!r} is no longer on {page}"
    found = re.search(rf"```{language}\n(.*?)```", text[text.index(after):], re.DOTALL)
    assert found is not None, f"no {language} block after {after!r} on {page}"
    return found.group(1)


def links(page: Path) -> list[str]:
    """The targets of the page's Markdown links, as written."""
    return _LINK.findall(prose(page.read_text(encoding="utf-8")))


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces become hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading counts by its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of the page's headings (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text(encoding="utf-8"))):
        slug = anchor(heading)
        count = seen.get(slug, 0)
        found.add(slug if count == 0 else f"{slug}-{count}")
        seen[slug] = count + 1
    return found
