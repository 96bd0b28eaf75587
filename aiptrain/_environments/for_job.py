"""PREPARING's first step: the environment a job runs in (on this machine, or on a Ray node), said in
its first log lines."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from aiptrain._environments import interpreters
from aiptrain._environments.resolution import Finder, RuntimeResolution, require_version, resolve_runtime
from aiptrain._environments.store import (
    BuildCancelled,
    Environment,
    EnvironmentBuildFailed,
    EnvironmentStore,
    Phase,
    envs_dir,
)
from aiptrain._job.catalog import Catalog
from aiptrain._job.era import ResolveDay, resolve_day
from aiptrain._job.spec import TrainingInput
from aiptrain._replicas.processes import TOKEN_VARIABLE
from aiptrain._replicas.settings import ReplicaSettings
from aiptrain.errors import OperationalError

_PROBE = (
    "import importlib.util as u\n"
    "missing = [m for m in ('pip', 'setuptools') if u.find_spec(m) is None]\n"
    "print(' or '.join(missing)); raise SystemExit(1 if missing else 0)"
)
Say = Callable[[str, str], None]  # (message, severity)


class JobEnvironmentFailed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def environment_for_job(
    training_input: TrainingInput,
    catalog: Catalog,
    *,
    home: Path,
    settings: ReplicaSettings,
    say: Say,
    stop: threading.Event,
    run_token: str,
) -> tuple[Environment | None, RuntimeResolution]:
    """The runtime environment of the job, built if needed, and how it was chosen; no environment
    with AIPTRAIN_LOCAL_PYTHON (whose ability to install packages `interpreter_problem` checks
    before its pip runs).

    Raises JobEnvironmentFailed (the job's errorMessage) or BuildCancelled.
    """
    if settings.python_override:
        resolution = resolve_runtime(training_input, catalog)
        say(f"Runtime version {resolution.version}: running with AIPTRAIN_LOCAL_PYTHON={settings.python} "
            "(no runtime environment is built; the trainer's dependencies must already be installed there).", "INFO")
        return None, resolution
    return runtime_environment(training_input, catalog, EnvironmentStore(envs_dir(home)), say=say, stop=stop,
                               run_token=run_token)


def runtime_environment(
    training_input: TrainingInput,
    catalog: Catalog,
    store: EnvironmentStore,
    *,
    say: Say,
    stop: threading.Event,
    run_token: str,
    progress: Callable[[str], None] | None = None,
    phase: Phase | None = None,
) -> tuple[Environment, RuntimeResolution]:
    """The job's runtime environment in `store` (this machine's, or a Ray node's), built if needed:
    its interpreter found (or downloaded), the choice announced through `say`, the build's lines
    through `progress` (default: `say` at INFO).

    Raises JobEnvironmentFailed (the job's errorMessage) or BuildCancelled.
    """
    resolution = with_interpreter(resolve_runtime(training_input, catalog), training_input, catalog, say)
    announce(resolution, say)
    if resolution.problem is not None:
        raise JobEnvironmentFailed(resolution.summary())
    try:
        environment = store.ensure(resolution, progress=progress or (lambda line: say(line, "INFO")), stop=stop,
                                   extra_env={TOKEN_VARIABLE: run_token}, phase=phase)
    except EnvironmentBuildFailed as failed:
        raise JobEnvironmentFailed(failed.message) from failed
    except BuildCancelled:
        raise
    except OSError as error:
        raise JobEnvironmentFailed(f"Cannot build the runtime environment under {store.root}: {error}") from error
    return environment, resolution


def with_interpreter(resolution: RuntimeResolution, training_input: TrainingInput, catalog: Catalog,
                     say: Say) -> RuntimeResolution:
    """`resolution` with its interpreter: downloaded by uv when none was found here (the runtime's
    Pythons in turn, nearest first), else resolved again without downloads, which falls back or
    names the problem."""
    if not resolution.needs_download:
        return resolution
    for python in resolution.alternatives:
        say(f"No Python {python} for runtime {resolution.version} was found here; downloading it with uv ...", "INFO")
        found, why = interpreters.download(python)
        if found is not None:
            return resolve_runtime(training_input, catalog, downloads=False, find=_only(found))
        say(f"The download of Python {python} failed: {why}.", "WARNING")
    return resolve_runtime(training_input, catalog, downloads=False)


def ran_in(resolution: RuntimeResolution, environment: Environment | None, settings: ReplicaSettings,
           day: ResolveDay | None = None) -> dict[str, Any]:
    """What a job runs in, as `jobs describe` reports it afterwards (JSON): with `day`, the day its
    packages resolved as of."""
    if environment is None:
        return {"python": settings.python, "notes": [
            f"Runtime version {resolution.version}: ran with AIPTRAIN_LOCAL_PYTHON={settings.python}."]}
    manifest = environment.manifest()
    found = {
        "python": environment.python,
        "pythonVersion": resolution.python,
        "tensorflow": resolution.tensorflow,
        "environment": str(environment.root),
        "installed": manifest.get("installed", {}),
        "notes": resolution.notes() + ([day.line()] if day is not None else []),
    }
    if day is not None:
        found["resolvedAsOf"] = day.to_json()
    return found


def job_day(resolution: RuntimeResolution, labels: Mapping[str, str] | None,
            env: Mapping[str, str]) -> ResolveDay:
    """The day a job's packages resolve as of, in the environment `resolution` chose."""
    return resolve_day(resolution.runtime, labels, env, stands_in=resolution.fallback)


def _only(found: interpreters.Interpreter) -> Finder:
    """A finder that knows the one interpreter just downloaded."""
    return lambda version, _env: found if version == found.version else None


def announce(resolution: RuntimeResolution, say: Say) -> None:
    """The substitution notes (INFO) and a retired runtime's warning (WARNING)."""
    for line in resolution.notes():
        say(line, "INFO")
    for warning in resolution.warnings():
        say(warning[0].upper() + warning[1:] + ".", "WARNING")


def environment_in_foreground(version: str, catalog: Catalog, home: Path, say: Say, *,
                              python: str | None = None) -> Environment:
    """A runtime's environment for a command run in a terminal (`local train`, `local envs build`):
    announced, built if needed; OperationalError when it cannot be had."""
    resolution = require_version(version, catalog, python=python)
    resolution = with_interpreter(resolution, TrainingInput(runtime_version=version, python_version=python),
                                  catalog, say)
    announce(resolution, say)
    if resolution.problem is not None:
        raise OperationalError(resolution.summary())
    try:
        return EnvironmentStore(envs_dir(home)).ensure(resolution, progress=lambda line: say(line, "INFO"))
    except EnvironmentBuildFailed as failed:
        raise OperationalError(failed.message) from failed


def interpreter_problem(python: str) -> str | None:
    """Why `python` cannot install a trainer package (no interpreter, no pip, no setuptools), or None."""
    try:
        # find_spec, not import: the check costs an interpreter start, not a setuptools import.
        result = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=False)
    except OSError as error:
        return (f"AIPTRAIN_LOCAL_PYTHON={python} cannot be run: {error.strerror}. Point it at a Python "
                "interpreter, or unset it to use the runtime version's environment.")
    except subprocess.TimeoutExpired:
        return f"AIPTRAIN_LOCAL_PYTHON={python} did not answer within 60 s."
    if result.returncode != 0:
        missing = result.stdout.strip() or "pip"
        return (f"AIPTRAIN_LOCAL_PYTHON={python} cannot install the trainer package: it has no {missing}. "
                f"Install it ({python} -m ensurepip; {python} -m pip install setuptools), or unset "
                "AIPTRAIN_LOCAL_PYTHON to use the runtime version's environment.")
    return None
