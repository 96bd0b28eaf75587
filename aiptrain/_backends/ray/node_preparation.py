"""PREPARING on one Ray node, for one replica: its runtime environment, then its trainer package.

It runs in the replica's actor, in a thread of its own, so that the driver can read its progress
(`poll`) and stop it (`cancel`) while it works. The environment comes from the local backend's
builder (`envs.for_job.runtime_environment`): the runtime's own interpreter where the node has
one, uv, the same fallback and the same words, one build per node under a file lock, published
whole. It is kept in the node's cache (`settings.node_cache_dir`), beside the installed trainer
packages, for later jobs. With AIPTRAIN_RAY_RUNTIME_PACKAGES=cluster the node's own Python runs
the trainer and nothing but the trainer package is installed.

No Ray here: the actor hands in where it runs and reads the events back.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiptrain._backends.ray.runtime_spec import spec_catalog, spec_day, spec_training_input
from aiptrain._backends.ray.settings import node_cache_dir
from aiptrain._environments.for_job import JobEnvironmentFailed, runtime_environment
from aiptrain._environments.store import BuildCancelled, Environment, EnvironmentStore
from aiptrain.errors import AiptrainError

# Event kinds, in the order a preparation produces them.
NOTE = "note"  # how the runtime is honoured on this node (the resolution's lines)
PHASE = "phase"  # "waiting" (another build of this environment holds the node's lock), "building"
READY = "ready"  # the environment is there: what it runs (JSON: `runtime_label`)
BUILD = "build"  # a line of the build's own progress (uv), while this replica builds
INSTALL = "install"  # a line of the trainer package's install


@dataclass
class Outcome:
    """How a preparation ended: the interpreter to run the trainer with, or why there is none."""

    python: str | None = None
    error: str | None = None
    cancelled: bool = False
    # What ran, as the driver compares it across nodes: environment name, TensorFlow, Python.
    runs: dict[str, str] = field(default_factory=dict)


def node_store(env: dict[str, str] | None = None) -> EnvironmentStore:
    return EnvironmentStore(node_cache_dir(env) / "envs")


def runtime_label(environment: Environment) -> dict[str, str]:
    manifest = environment.manifest()
    return {"environment": str(manifest.get("name", "")), "tensorflow": str(manifest.get("tensorflow", "")),
            "python": str(manifest.get("python_version", "")), "root": str(environment.root)}


class NodePreparation:
    """One replica's preparation on its node, started at once in a thread of its own."""

    def __init__(self, request: dict[str, Any], site_dir: Path) -> None:
        self.request = request
        self.site_dir = site_dir
        self.stop = threading.Event()
        self.condition = threading.Condition()
        self.events: list[tuple[str, str, str]] = []  # (kind, severity, message)
        self.outcome: Outcome | None = None
        self.thread = threading.Thread(target=self._run, name="aiptrain-prepare", daemon=True)
        self.thread.start()

    # -- what the actor calls ------------------------------------------------------------------

    def poll(self, wait: float) -> tuple[list[tuple[str, str, str]], Outcome | None]:
        """Events since the last poll, and the outcome once it ended; waits up to `wait` s for either."""
        with self.condition:
            self.condition.wait_for(lambda: bool(self.events) or self.outcome is not None, wait)
            events, self.events = self.events, []
            return events, self.outcome

    def cancel(self, timeout: float) -> bool:
        """Stop the build or install (its processes are killed, a half-built environment removed);
        whether it ended within `timeout` seconds."""
        self.stop.set()
        self.thread.join(timeout)
        return not self.thread.is_alive()

    # -- the work ------------------------------------------------------------------------------

    def add_event(self, kind: str, severity: str, message: str) -> None:
        with self.condition:
            self.events.append((kind, severity, message))
            self.condition.notify_all()

    def _run(self) -> None:
        try:
            outcome = self._prepare()
        except BuildCancelled:
            outcome = Outcome(cancelled=True)
        except JobEnvironmentFailed as failed:
            outcome = Outcome(error=failed.message)
        except AiptrainError as error:  # e.g. no uv in the node's Python
            outcome = Outcome(error=f"{error.message} ({error.hint})" if error.hint else error.message)
        except Exception as error:  # the driver must hear of it, not wait for ever
            outcome = Outcome(error=f"Preparing the replica failed on its node: {error!r}")
        if self.stop.is_set() and outcome.error is None:
            outcome = Outcome(cancelled=True)
        with self.condition:
            self.outcome = outcome
            self.condition.notify_all()

    def _prepare(self) -> Outcome:
        from aiptrain._environments.preparation import install_packages

        request = self.request
        run_token = str(request["runToken"])
        environment: Environment | None = None
        day = None
        runs: dict[str, str] = {}
        if request["packagesMode"] != "cluster":
            spec = request["runtime"]
            environment, resolution = runtime_environment(
                spec_training_input(spec), spec_catalog(spec), node_store(), stop=self.stop, run_token=run_token,
                say=lambda message, severity: self.add_event(NOTE, severity, message),
                progress=lambda line: self.add_event(BUILD, "INFO", line),
                phase=lambda phase: self.add_event(PHASE, "", phase),
            )
            runs = runtime_label(environment)
            self.add_event(READY, "", json.dumps(runs))
            day = spec_day(spec, resolution)
        python = environment.python if environment is not None else sys.executable
        error = install_packages(
            list(request["packageUris"]),
            site_dir=self.site_dir,
            storage_root=Path(request["storeDir"]).resolve(),
            python=python,
            base_env=dict(os.environ),
            run_token=run_token,
            sink=_EventSink(self),
            stop=self.stop,
            kill_grace=float(request["killGrace"]),
            cache_dir=node_cache_dir() / "installs",
            environment=environment,
            day=day,
        )
        if self.stop.is_set():
            return Outcome(cancelled=True)
        if error is not None:
            return Outcome(error=error)
        return Outcome(python=python, runs=runs or {"python": python})


class _EventSink:
    """The LogSink `install_packages` writes to: its lines become INSTALL events."""

    def __init__(self, preparation: NodePreparation) -> None:
        self.preparation = preparation

    def emit(self, task_name: str, severity: str, message: str, **_: Any) -> None:
        self.preparation.add_event(INSTALL, severity, message)


def node_python(request: dict[str, Any]) -> str:
    """The interpreter replicas of this job run with on this node, the environment found or built
    (for work on the node outside a replica: reading a trial's summary events)."""
    if request["packagesMode"] == "cluster":
        return sys.executable
    spec = request["runtime"]
    environment, _resolution = runtime_environment(
        spec_training_input(spec), spec_catalog(spec), node_store(), stop=threading.Event(),
        run_token=str(request["runToken"]), say=lambda _message, _severity: None)
    return environment.python
