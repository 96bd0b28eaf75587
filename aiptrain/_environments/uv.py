"""The uv binary (shipped by the `uv` wheel, a dependency of aiptrain) and how its errors read."""

from __future__ import annotations

import os
import re

from aiptrain.errors import InternalError

# uv prints a resolver failure as "  (cross) No solution found ..." then "  ╰─▶ Because ...".
_CROSS = "\u00d7"
_ERROR_MARKERS = (_CROSS, "╰─▶", "error:", "Because", "help:")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def uv_binary() -> str:
    """The uv executable installed with aiptrain (never one found on PATH)."""
    try:
        from uv import find_uv_bin
    except ImportError as error:
        raise InternalError("the uv package is missing from aiptrain's environment; reinstall aiptrain") from error
    return str(find_uv_bin())


def uv_environment(base: dict[str, str]) -> dict[str, str]:
    """uv's settings for aiptrain: pip's index and certificates (see `pip_config`), never a
    Python download behind the user's back, no colour or progress bars."""
    from aiptrain._environments.pip_config import pip_settings

    env = dict(base)
    env.update(pip_settings(base).uv_variables(base))
    env.update({"UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1", "UV_NO_PROGRESS": "1"})
    for name in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTHONPATH"):
        env.pop(name, None)
    return env


def failure_reason(lines: list[str]) -> str:
    """The part of uv's output that says why it failed (the resolver's explanation), one paragraph."""
    cleaned = [_ANSI.sub("", line).strip() for line in lines]
    start = next((i for i, line in enumerate(cleaned) if line.startswith(_ERROR_MARKERS)), None)
    chosen = cleaned[start:] if start is not None else cleaned[-6:]
    words = []
    for line in chosen:
        text = line.removeprefix(_CROSS).removeprefix("╰─▶").strip()
        for label in ("error:", "Caused by:", "cause:"):
            text = text.removeprefix(label).strip()
        if text:
            words.append(text)
    return " ".join(words) or "uv gave no reason"


def environment_python(root: os.PathLike[str] | str) -> str:
    return os.path.join(os.fspath(root), "bin", "python")
