"""The explicit registry of backends. Each is imported only when chosen, to keep the CLI fast.

Every entry holds a typed factory, so mypy checks that each backend class satisfies the `Backend`
protocol, while the import inside it waits until the backend is asked for, and what must be known
before the backend exists (whether jobs need a project).

Folders: `local/`, `ray/`, `vertex/`, `mlv1/` (one backend each; `mlv1/` also holds the REST
client the Vertex backend uses), `base.py` (the protocol), `polling.py` (how followers poll).
May import: `errors`, `paths`, `cache_eviction`, `loopback`, `job` and, in the registry when one is chosen, each
backend's folder (`backends.local`, `backends.ray`, `backends.vertex`, `backends.mlv1`). Never
`submit` or `cli`. Generic code reaches a backend only through this registry and the protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiptrain.errors import UsageError

if TYPE_CHECKING:
    from aiptrain._backends.base import Backend, BackendSettings


def _local(settings: BackendSettings) -> Backend:
    from aiptrain._backends.local.backend import LocalBackend

    return LocalBackend(settings)


def _ray(settings: BackendSettings) -> Backend:
    from aiptrain._backends.ray.backend import RayBackend

    return RayBackend(settings)


def _vertex(settings: BackendSettings) -> Backend:
    from aiptrain._backends.vertex.backend import VertexBackend

    return VertexBackend(settings)


def _mlv1(settings: BackendSettings) -> Backend:
    from aiptrain._backends.mlv1.backend import MlV1Backend

    return MlV1Backend(settings)


# The project of jobs on backends that need no cloud project.
DEFAULT_LOCAL_PROJECT = "local-project"


@dataclass(frozen=True)
class BackendEntry:
    factory: Callable[[BackendSettings], Backend]
    # The project jobs get when none is given; None: the backend's service needs a real one.
    default_project: str | None = None


# name (`--backend NAME`) -> its entry.
BACKENDS: dict[str, BackendEntry] = {
    "local": BackendEntry(_local, default_project=DEFAULT_LOCAL_PROJECT),
    "ray": BackendEntry(_ray, default_project=DEFAULT_LOCAL_PROJECT),
    "vertex": BackendEntry(_vertex),
    "mlv1": BackendEntry(_mlv1),
}


def backend_entry(name: str) -> BackendEntry:
    entry = BACKENDS.get(name)
    if entry is None:
        raise UsageError(
            f"unknown backend {name!r}",
            hint=f"use --backend with one of: {', '.join(BACKENDS)}",
        )
    return entry


def get_backend(name: str, settings: BackendSettings) -> Backend:
    return backend_entry(name).factory(settings)
