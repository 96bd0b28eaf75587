"""The explicit registry of backends. Each is imported only when chosen, to keep the CLI fast.

Every entry is a typed factory, so mypy checks that each backend class satisfies the `Backend`
protocol, while the import inside it waits until the backend is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from aiptrain.errors import UsageError

if TYPE_CHECKING:
    from aiptrain.backends.base import Backend, BackendSettings


def _local(settings: BackendSettings) -> Backend:
    from aiptrain.backends.local.backend import LocalBackend

    return LocalBackend(settings)


def _ray(settings: BackendSettings) -> Backend:
    from aiptrain.backends.ray.backend import RayBackend

    return RayBackend(settings)


def _vertex(settings: BackendSettings) -> Backend:
    from aiptrain.backends.vertex.backend import VertexBackend

    return VertexBackend(settings)


def _mlv1(settings: BackendSettings) -> Backend:
    from aiptrain.backends.rest.mlv1 import MlV1Backend

    return MlV1Backend(settings)


# name (`--backend NAME`) -> factory taking BackendSettings.
BACKENDS: dict[str, Callable[[BackendSettings], Backend]] = {
    "local": _local,
    "ray": _ray,
    "vertex": _vertex,
    "mlv1": _mlv1,
}


def get_backend(name: str, settings: BackendSettings) -> Backend:
    factory = BACKENDS.get(name)
    if factory is None:
        raise UsageError(
            f"unknown backend {name!r}",
            hint=f"use --backend with one of: {', '.join(BACKENDS)}",
        )
    return factory(settings)
