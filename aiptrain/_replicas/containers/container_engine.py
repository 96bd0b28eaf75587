"""Finding the container engine and calling its command line.

Docker's and Podman's command lines take the same verbs and flags for everything aiptrain does
(create, start --attach, stop, kill, rm, network, image inspect, import), so one `ContainerEngine` drives
either; what differs is said where it matters (`ContainerEngine.create_options`). The command line is used
rather than the engine's HTTP API: Podman serves that API only while `podman system service` runs,
and `start --attach` hands each replica's stdout and stderr over as two pipes, exactly what a
process replica gives the log capture.

The engine's own variables (DOCKER_HOST, CONTAINER_HOST, ...) are recorded with every job that
starts containers, so that whoever sweeps up after a dead supervisor reaches the same daemon.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiptrain._replicas.containers.settings import ENGINE_VARIABLE, ContainerSettings
from aiptrain.errors import OperationalError

# The variables that choose which daemon (and how) the engine's command line talks to.
ENGINE_HOST_VARIABLES = (
    "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH",
    "CONTAINER_HOST", "CONTAINER_CONNECTION", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF",
)
_CHECK_SECONDS = 20.0
# Asking whether an engine that was in use still answers (a replica's client ended in error).
_ANSWER_SECONDS = 10.0
ENGINE_NAMES = {"docker": "Docker", "podman": "Podman"}
_PODMAN_INITS = ("/usr/libexec/podman/catatonit", "/usr/bin/catatonit", "/usr/local/libexec/podman/catatonit")


class EngineUnavailable(OperationalError):
    """No container engine can run a container here (and why)."""


class EngineCallFailed(OperationalError):
    """The engine refused a call: its message is the error's."""


@dataclass(frozen=True)
class ContainerEngine:
    kind: str  # docker | podman
    binary: str  # the command line's absolute path
    environment: tuple[tuple[str, str], ...] = ()  # the engine's own variables (ENGINE_HOST_VARIABLES) set
    version: str = field(default="", compare=False)

    @property
    def name(self) -> str:
        return ENGINE_NAMES[self.kind]

    @property
    def is_podman(self) -> bool:
        return self.kind == "podman"

    def process_environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of an engine call: this process's, the recorded engine variables on top."""
        env = dict(os.environ)
        for name in ENGINE_HOST_VARIABLES:
            env.pop(name, None)
        env.update(dict(self.environment))
        env.update(extra or {})
        return env

    def run(self, args: Sequence[str], *, input: bytes | None = None, timeout: float = 120.0,
            check: bool = True) -> subprocess.CompletedProcess[bytes]:
        """Run `ENGINE ARGS...`; with `check`, an EngineCallFailed carrying its error output."""
        try:
            done = subprocess.run([self.binary, *args], input=input, capture_output=True, timeout=timeout,
                                  env=self.process_environment(), check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise EngineCallFailed(f"{self.name} ({self.binary} {' '.join(args[:2])}) failed: {error}") from None
        if check and done.returncode != 0:
            raise EngineCallFailed(f"{self.name} refused `{' '.join(args[:2])}`: {engine_message(done.stderr)}")
        return done

    def output(self, args: Sequence[str], **kwargs: Any) -> str:
        return self.run(args, **kwargs).stdout.decode(errors="replace").strip()

    def create_options(self) -> list[str]:
        """Options every container of this engine needs here.

        Podman gives containers default limits above what the host allows an unprivileged
        process, and runc then fails to start them ("error setting rlimit"): they are lowered to
        this process's own hard limits, never raised. Docker containers inherit the daemon's. Podman's
        `--init` is catatonit, which its Debian package does not bring: tini (Docker's init, a
        dependency of docker.io) stands in where it is the one found.
        """
        if not self.is_podman:
            return []
        options = []
        if not any(os.path.exists(path) for path in _PODMAN_INITS):
            tini = shutil.which("tini-static") or shutil.which("tini")
            if tini is not None:
                options += ["--init-path", tini]
        for name, limit, ceiling in (("nofile", resource.RLIMIT_NOFILE, "/proc/sys/fs/nr_open"),
                                     ("nproc", resource.RLIMIT_NPROC, "/proc/sys/kernel/pid_max")):
            _soft, hard = resource.getrlimit(limit)
            # runc refuses a process limit above the kernel's pid_max (measured: 32768 here).
            value = min(hard if hard != resource.RLIM_INFINITY else _kernel_value(ceiling), _kernel_value(ceiling))
            if value:
                options += ["--ulimit", f"{name}={value}:{value}"]
        return options

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "binary": self.binary, "environment": dict(self.environment)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ContainerEngine:
        return cls(kind=str(data["kind"]), binary=str(data["binary"]),
                   environment=tuple(sorted(dict(data.get("environment") or {}).items())))


def _kernel_value(path: str) -> int:
    """A number from /proc/sys (0 where it cannot be read)."""
    try:
        with open(path) as file:
            return int(file.read().strip())
    except (OSError, ValueError):
        return 0


def engine_message(stderr: bytes) -> str:
    """The engine's error output without its warnings about this host (forwarding off, ...)."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines()]
    kept = [line for line in lines if line and not line.startswith("WARNING:")]
    return " ".join(kept) or "(no message)"


def _current_engine_environment() -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, os.environ[name]) for name in ENGINE_HOST_VARIABLES if os.environ.get(name)))


def find_engine(settings: ContainerSettings | None = None) -> ContainerEngine:
    """The engine that runs containers here, checked to answer; EngineUnavailable says why none does."""
    chosen = settings or ContainerSettings.from_env()
    return _find_engine(chosen.engine, _current_engine_environment(), os.environ.get("PATH", ""))


def engine_answers(engine: ContainerEngine, timeout: float = _ANSWER_SECONDS) -> bool:
    """Whether the engine's daemon (Docker) or store (Podman) answers now."""
    try:
        _checked(engine, timeout)
    except EngineUnavailable:
        return False
    return True


@functools.cache
def _find_engine(choice: str, environment: tuple[tuple[str, str], ...], _path: str) -> ContainerEngine:
    if choice not in ("auto", "docker", "podman"):
        kind = "podman" if "podman" in os.path.basename(choice) else "docker"
        return _checked(ContainerEngine(kind, choice, environment))
    kinds = ("docker", "podman") if choice == "auto" else (choice,)
    reasons: list[str] = []
    for kind in kinds:
        binary = shutil.which(kind)
        if binary is None:
            reasons.append(f"{ENGINE_NAMES[kind]} is not installed ({kind} is not on PATH)")
            continue
        try:
            return _checked(ContainerEngine(kind, binary, environment))
        except EngineUnavailable as error:
            reasons.append(error.message)
    raise EngineUnavailable(
        "no container engine runs here: " + "; ".join(reasons),
        hint="install Docker (Debian: apt-get install docker.io, then start dockerd) or Podman "
             f"(apt-get install podman){'' if choice == 'auto' else f', or set {ENGINE_VARIABLE}=auto'}",
    )


def _checked(engine: ContainerEngine, timeout: float = _CHECK_SECONDS) -> ContainerEngine:
    """`engine` if its daemon (Docker) or its store (Podman) answers."""
    query = "{{.Server.Version}}" if engine.kind == "docker" else "{{.Client.Version}}"
    try:
        done = subprocess.run([engine.binary, "version", "--format", query], capture_output=True,
                              timeout=timeout, env=engine.process_environment(), check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise EngineUnavailable(f"{engine.name} ({engine.binary}) does not answer: {error}") from None
    version = done.stdout.decode(errors="replace").strip()
    if done.returncode != 0 or not version:
        raise EngineUnavailable(f"{engine.name} ({engine.binary}) does not answer: {engine_message(done.stderr)}")
    return ContainerEngine(engine.kind, engine.binary, engine.environment, version)


def forget_engines() -> None:
    """Look for the engine again at the next `find_engine` (a test started or stopped a daemon)."""
    _find_engine.cache_clear()
