"""The container settings, read from the environment (documented in docs/reference/settings.md).

- AIPTRAIN_CONTAINER_ENGINE: `auto` (Docker when its daemon answers, else Podman), `docker`,
  `podman`, or the path of a Docker-compatible command line;
- AIPTRAIN_CONTAINER_PULL: `never` (only images already on this machine run) or `missing` (an
  image that is not here is pulled from its registry when the job starts).

The engine's own variables (DOCKER_HOST, CONTAINER_HOST, ...) reach its command line unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from aiptrain._replicas.settings import choice_setting
from aiptrain.errors import UsageError

ENGINE_VARIABLE = "AIPTRAIN_CONTAINER_ENGINE"
PULL_VARIABLE = "AIPTRAIN_CONTAINER_PULL"
PULL_CHOICES = ("never", "missing")


@dataclass(frozen=True)
class ContainerSettings:
    engine: str = "auto"  # auto | docker | podman | a path
    pull: str = "never"  # never | missing

    @property
    def pulls(self) -> bool:
        return self.pull == "missing"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ContainerSettings:
        source = os.environ if env is None else env
        engine = source.get(ENGINE_VARIABLE, "").strip() or "auto"
        if engine.lower() in ("auto", "docker", "podman"):
            engine = engine.lower()
        elif "/" not in engine:
            raise UsageError(f"{ENGINE_VARIABLE}={engine!r} is not an engine",
                             hint=f"set {ENGINE_VARIABLE} to auto, docker, podman or the path of a "
                                  "Docker-compatible command line")
        return cls(engine=engine, pull=choice_setting(source, PULL_VARIABLE, PULL_CHOICES))
