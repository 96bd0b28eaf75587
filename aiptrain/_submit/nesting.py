"""How deep and how big a parsed JSON/YAML document is, measured without recursion.

Parsers and validators walk documents recursively, so a document nested thousands of levels
deep ends in RecursionError, and a YAML file whose aliases refer to aliases expands to billions
of values once walked. Both are refused up front with a reason.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 100  # the proto JSON parser's recursion limit
MAX_VALUES = 200_000  # far above any real Job (a few hundred values), far below a YAML bomb


def nesting_problem(document: Any, *, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES) -> str | None:
    """Why `document` is too deep or too big to process, or None."""
    seen = 0
    stack: list[tuple[Any, int]] = [(document, 0)]
    while stack:
        item, depth = stack.pop()
        seen += 1
        if seen > max_values:
            return f"it holds more than {max_values} values (YAML aliases count each time they are used)"
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth + 1 > max_depth:
            return f"it is nested deeper than {max_depth} levels"
        stack.extend((child, depth + 1) for child in children)
    return None
