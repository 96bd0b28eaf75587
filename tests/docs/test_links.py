"""The manual holds together: every relative link and anchor resolves, every page is reachable
from docs/index.md, and the README points into it and stays a first read."""

from __future__ import annotations

from pathlib import Path

from tests.docs.manual import DOCS, INDEX, README, REPO, anchor, anchors, links, pages


def _resolve(page: Path, target: str) -> tuple[Path, str]:
    path, _, fragment = target.partition("#")
    return (page if not path else (page.parent / path).resolve()), fragment


def _is_external(target: str) -> bool:
    return "://" in target or target.startswith("mailto:")


def test_every_relative_link_and_anchor_resolves() -> None:
    broken = []
    for page in pages():
        for target in links(page):
            if _is_external(target):
                continue
            path, fragment = _resolve(page, target)
            where = f"{page.relative_to(REPO)}: ({target})"
            if not path.exists():
                broken.append(f"{where} names a file that does not exist")
            elif fragment and path.suffix == ".md" and fragment not in anchors(path):
                broken.append(f"{where}: no heading of {path.relative_to(REPO)} has the anchor #{fragment}")
    assert not broken, "\n".join(broken)


def test_every_page_is_reachable_from_the_index() -> None:
    reached, todo = {INDEX}, [INDEX]
    while todo:
        page = todo.pop()
        for target in links(page):
            path, _ = _resolve(page, target)
            if not _is_external(target) and path.suffix == ".md" and DOCS in path.parents and path not in reached:
                reached.add(path)
                todo.append(path)
    unreached = sorted(str(page.relative_to(REPO)) for page in DOCS.rglob("*.md") if page not in reached)
    assert not unreached, f"pages no link from docs/index.md leads to: {unreached}"


def test_the_readme_leads_into_the_manual_and_stays_short() -> None:
    text = README.read_text(encoding="utf-8")
    assert "docs/index.md" in links(README)
    assert len(text.splitlines()) <= 250, "the README starts a user; the manual is docs/"
    for backend in ("local", "ray", "vertex", "mlv1"):
        assert f"docs/backends/{backend}.md" in links(README)


def test_anchors_follow_githubs_rule() -> None:
    # The rule the link check relies on, on headings the manual has.
    assert anchor("`gs://` from the trainer's code") == "gs-from-the-trainers-code"
    assert anchor("The `mlv1` backend and `aiptrain local serve`") == "the-mlv1-backend-and-aiptrain-local-serve"
    assert anchor("`aiptrain jobs submit training`") == "aiptrain-jobs-submit-training"
