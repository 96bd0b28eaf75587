"""The explicit registry of backends. Each is imported only when chosen, to keep the CLI fast."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from aiptrain.errors import UsageError

if TYPE_CHECKING:
    from aiptrain.backends.base import Backend, BackendSettings

# name -> "module:factory"; the factory takes BackendSettings and returns a Backend.
BACKENDS: dict[str, str] = {
    "local": "aiptrain.backends.local:LocalBackend",
    "ray": "aiptrain.backends.ray:RayBackend",
    "vertex": "aiptrain.backends.vertex:VertexBackend",
    "mlv1": "aiptrain.backends.mlv1:MlV1Backend",
}


def get_backend(name: str, settings: BackendSettings) -> Backend:
    target = BACKENDS.get(name)
    if target is None:
        raise UsageError(
            f"unknown backend {name!r}",
            hint=f"use --backend with one of: {', '.join(BACKENDS)}",
        )
    module_name, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    backend: Backend = factory(settings)
    return backend
