"""The discovery documents the emulator validates request bodies against.

They are the static copies google-api-python-client ships (the same files the REST backends build
their clients from), located on disk without importing googleapiclient.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

from aiptrain.errors import InternalError


def documents_dir() -> Path:
    spec = importlib.util.find_spec("googleapiclient")
    if spec is None or not spec.submodule_search_locations:
        raise InternalError("google-api-python-client is not installed; the emulator needs its "
                            "discovery documents")
    return Path(next(iter(spec.submodule_search_locations))) / "discovery_cache" / "documents"


@functools.cache
def discovery_document(api: str, version: str) -> dict[str, Any]:
    path = documents_dir() / f"{api}.{version}.json"
    try:
        document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InternalError(f"cannot read the discovery document {path}: {error}") from error
    return document
