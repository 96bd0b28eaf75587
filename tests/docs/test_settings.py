"""docs/reference/settings.md names every AIPTRAIN_* variable the code reads, and no other."""

from __future__ import annotations

import ast
import re

from tests.docs.manual import DOCS, REPO

PAGE = DOCS / "reference" / "settings.md"
_NAME = re.compile(r"AIPTRAIN_[A-Z0-9_]+")


def names_in_code() -> dict[str, set[str]]:
    """Each AIPTRAIN_* name that aiptrain's code holds as a string of its own (what `os.environ.get`,
    click's `envvar=` and the modules' `*_VARIABLE` constants are given), with the files holding it."""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / "aiptrain").rglob("*.py")):
        relative = path.relative_to(REPO)
        if relative.parts[1] == "data":  # the trainer template and catalogs shipped as data
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _NAME.fullmatch(node.value):
                found.setdefault(node.value, set()).add(str(relative))
    return found


def table_rows() -> dict[str, list[str]]:
    """The settings table's rows by name: what it does, its default, who reads it."""
    rows = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\| `(AIPTRAIN_[A-Z0-9_]+)` \|(.*)\|$", line)
        if match:
            assert match.group(1) not in rows, f"{match.group(1)} has two rows"
            rows[match.group(1)] = [cell.strip() for cell in re.split(r"(?<!\\)\|", match.group(2))]
    return rows


def test_every_setting_the_code_reads_is_in_the_table() -> None:
    in_code, in_table = names_in_code(), table_rows()
    missing = {name: sorted(files) for name, files in in_code.items() if name not in in_table}
    assert not missing, f"add these to docs/reference/settings.md: {missing}"
    gone = sorted(set(in_table) - set(in_code))
    assert not gone, f"docs/reference/settings.md lists settings the code no longer reads: {gone}"


def test_every_row_says_what_the_setting_does_its_default_and_who_reads_it() -> None:
    for name, cells in table_rows().items():
        assert len(cells) == 3 and all(cells), f"{name}: {cells}"


def test_the_scan_finds_the_ways_the_code_names_a_setting() -> None:
    # os.environ.get("..."), click's envvar=, and a module constant (TOKEN_VARIABLE = "...").
    found = names_in_code()
    assert "aiptrain/_paths.py" in found["AIPTRAIN_HOME"]
    assert "aiptrain/_cli/jobs.py" in found["AIPTRAIN_STORAGE"]
    assert "aiptrain/_replicas/processes.py" in found["AIPTRAIN_RUN_TOKEN"]
