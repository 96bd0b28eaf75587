"""The public surface: `aiptrain.__all__` is exactly what docs/python-api.md uses.

The page's names are those its Python examples take from `aiptrain` (`aiptrain.X`, `from aiptrain
import X`), those its prose writes as `aiptrain.X`, and the functions of its table; every one must
be in `__all__` and load, and every name of `__all__` (but `__version__`) must be on the page, so
neither grows without the other. The examples import from `aiptrain` only.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import aiptrain

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "python-api.md"
_CODE = re.compile(r"```python\n(.*?)```", re.DOTALL)
_PROSE_NAME = re.compile(r"`aiptrain\.([A-Za-z_]\w*)")
_TABLE_FUNCTION = re.compile(r"^\| `(\w+)\(", re.MULTILINE)


def code_blocks(page: str) -> list[str]:
    return _CODE.findall(page)


def names_in_code(code: str) -> set[str]:
    """What a Python example takes from `aiptrain` (and, as "aiptrain.sub", any module under it)."""
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "aiptrain":
            names.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module == "aiptrain":
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("aiptrain."):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name.startswith("aiptrain."))
    return names


def page_names(page: str) -> set[str]:
    names = set(_PROSE_NAME.findall(page)) | set(_TABLE_FUNCTION.findall(page))
    for code in code_blocks(page):
        names |= names_in_code(code)
    return names


def test_all_is_what_the_python_api_page_uses() -> None:
    assert sorted(page_names(PAGE.read_text())) == sorted(set(aiptrain.__all__) - {"__version__"})


def test_every_public_name_loads() -> None:
    for name in aiptrain.__all__:
        assert getattr(aiptrain, name) is not None, name
    assert aiptrain.JobState.FAILED == "FAILED"
    assert aiptrain.Job.__module__.startswith("aiptrain.")


def test_the_examples_import_from_aiptrain_only() -> None:
    reached = {name for code in code_blocks(PAGE.read_text()) for name in names_in_code(code) if "." in name}
    assert reached == set()


def test_the_page_is_parsed_for_its_code_prose_and_table() -> None:
    page = """
| `get(job_id)` | `Job` | `jobs describe` |

A `LogEntry` (`aiptrain.LogEntry`) has ...

```python
import aiptrain
from aiptrain._job.spec import JobState
ended = aiptrain.wait("x")
```
"""
    assert page_names(page) == {"get", "LogEntry", "wait", "aiptrain._job.spec"}
