"""ARCHITECTURE.md is the map a newcomer reads first: it must name every package and only modules
that exist.

Its "The folders" section has a paragraph per top-level package (`**`job/`**: ...`) and, inside
it, a bullet per package of that package (`- `local/`: ...`). Every backticked module name in a
paragraph (`store`, `store.py`, `job/era`, `containers/`) must be a module or package of that
folder, or a path from aiptrain/. What each paragraph states a folder may import is checked
against the layer rule table by tests/test_layers.py.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "aiptrain"
MAP = REPO / "ARCHITECTURE.md"
SKIPPED = {"data"}  # shipped data, not code
_TOP = re.compile(r"^\*\*`([a-z0-9_]+)/`\*\*")
_INNER = re.compile(r"^- `([a-z0-9_]+)/`:")
# A backticked module name, file name or path: `store`, `store.py`, `job/era`, `containers/`.
_MODULE_NAME = re.compile(r"`([a-z_][a-z0-9_]*(?:/[a-z_][a-z0-9_]*)*(?:\.py|/)?)`")


def folder_paragraphs(text: str | None = None) -> dict[str, str]:
    """`job/`, `backends/local/` ... -> its paragraph in ARCHITECTURE.md's "The folders"."""
    text = MAP.read_text() if text is None else text
    section = text.split("## The folders", 1)[1].split("\n## ", 1)[0]
    paragraphs: dict[str, str] = {}
    for block in section.split("\n\n"):
        top = _TOP.match(block.strip())
        if top is None:
            continue
        current = f"{top.group(1)}/"
        paragraphs[current] = ""
        for line in block.strip().splitlines():
            inner = _INNER.match(line)
            if inner is not None:
                current = f"{top.group(1)}/{inner.group(1)}/"
                paragraphs[current] = ""
            paragraphs[current] += line + "\n"
    return paragraphs


def package_folders() -> set[str]:
    return {path.parent.relative_to(PACKAGE).as_posix() + "/" for path in PACKAGE.rglob("__init__.py")
            if path.parent != PACKAGE and SKIPPED.isdisjoint(path.relative_to(PACKAGE).parts)}


def exists(folder: str, name: str) -> bool:
    """Whether `name`, as a paragraph of `folder` names it, is a module or folder there, beside
    it or, as a path, under aiptrain/ or the repository; or a library's module (`sqlite3`, `ray`: what the folder
    is the only importer of)."""
    bare = name.removesuffix("/").removesuffix(".py")
    bases = (PACKAGE / folder, (PACKAGE / folder).parent, PACKAGE, REPO)
    if any((base / f"{bare}.py").is_file() or (base / bare).is_dir() for base in bases):
        return True
    return "/" not in name and not name.endswith(".py") and importlib.util.find_spec(bare) is not None


def missing_modules(paragraphs: dict[str, str]) -> list[str]:
    return [f"{folder}: `{name}`" for folder, paragraph in paragraphs.items()
            for name in _MODULE_NAME.findall(paragraph) if not exists(folder, name)]


def test_every_package_has_its_paragraph() -> None:
    assert sorted(package_folders() - set(folder_paragraphs())) == []


def test_every_paragraph_is_of_a_package() -> None:
    assert sorted(set(folder_paragraphs()) - package_folders()) == []


def test_every_module_the_map_names_exists() -> None:
    assert missing_modules(folder_paragraphs()) == []


def test_the_checks_see_a_missing_package_and_module() -> None:
    text = ("## The folders\n\n**`backends/`**: `base.py`, `job/era` and `no_such_module`.\n"
            "- `local/`: `engine`, `nothing_here`, a `Job` and `LOG_PAGE`.\n\n## Next\n\n**`cli/`**: elsewhere.\n")
    paragraphs = folder_paragraphs(text)
    assert set(paragraphs) == {"backends/", "backends/local/"}
    assert missing_modules(paragraphs) == ["backends/: `no_such_module`", "backends/local/: `nothing_here`"]
