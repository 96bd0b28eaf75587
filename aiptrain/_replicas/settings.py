"""How replicas are run, read from the environment (documented in docs/reference/settings.md): restarts, grace
periods, the replica cap, the interpreter, where environments live. The local backend and the Ray
driver both run replica sets under these rules; `max_running` is the local backend's alone.

The supervisor inherits the environment of whoever submitted the job, so a setting in force
at submit time is the one the job runs with.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from aiptrain.errors import UsageError

# Without AIPTRAIN_LOCAL_REPLICA_CAP, jobs larger than this are refused rather than started:
# STANDARD_1 (8 replicas) runs, PREMIUM_1 (31) would swamp a workstation.
DEFAULT_MAX_REPLICAS = 16


def _default_max_running() -> int:
    return max(1, (os.cpu_count() or 2) // 2)


def _int_setting(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"{name}={raw!r} is not an integer", hint=f"set {name} to a whole number") from None
    if value < minimum:
        raise UsageError(f"{name}={value} is too small", hint=f"set {name} to {minimum} or more")
    return value


def _seconds_setting(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{name}={raw!r} is not a number of seconds", hint=f"set {name} to e.g. 5") from None
    if not math.isfinite(value):
        raise UsageError(f"{name}={raw!r} is not a finite number of seconds", hint=f"set {name} to e.g. 5")
    if value < 0:
        raise UsageError(f"{name}={value} is negative", hint=f"set {name} to 0 or more seconds")
    return value


def choice_setting(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    """One of `choices` (the first when unset)."""
    value = env.get(name, "").strip().lower() or choices[0]
    if value not in choices:
        raise UsageError(f"{name}={value!r} is not one of {', '.join(choices)}",
                         hint=f"unset {name}, or set it to one of {', '.join(choices)}")
    return value


@dataclass(frozen=True)
class ReplicaSettings:
    """Every tunable of running replicas (local and Ray), with its environment variable."""

    # AIPTRAIN_LOCAL_MAX_RUNNING: jobs in PREPARING/RUNNING at once on this machine; others wait QUEUED.
    max_running: int
    # AIPTRAIN_LOCAL_MAX_RESTARTS: restarts allowed per worker/ps/evaluator replica before the job fails.
    max_restarts: int = 3
    # AIPTRAIN_LOCAL_RESTART_DELAY: seconds before a replica's first restart, doubling for each next one.
    restart_delay: float = 1.0
    # AIPTRAIN_LOCAL_KILL_GRACE: seconds between SIGTERM and SIGKILL when stopping replicas.
    kill_grace: float = 5.0
    # AIPTRAIN_LOCAL_EVALUATOR_GRACE: seconds evaluators may keep running after the primary succeeded.
    evaluator_grace: float = 60.0
    # AIPTRAIN_LOCAL_REPLICA_CAP: shrink bigger clusters to this many replicas (unset: no shrinking).
    replica_cap: int | None = None
    # AIPTRAIN_LOCAL_PYTHON: the interpreter for pip and the replicas instead of the runtime
    # version's environment (unset: each job runs in its runtime's environment, built with uv).
    python: str = sys.executable
    python_override: bool = False
    # AIPTRAIN_LOCAL_GCS: `endpoint` (replicas reach gs:// through the job's storage endpoint) or
    # `rewrite` (gs:// in --job-dir and arguments becomes a local path, nothing is served).
    gcs: str = "endpoint"
    # AIPTRAIN_LOCAL_CPU_SHARE: `on` (each replica's thread pools sized to its machine type's share
    # of the cores, and pinned to its own cores where they fit, two or more each), `threads`
    # (sized, not pinned) or `off` (every replica sizes its pools for the whole machine). GPUs are
    # handed out either way.
    cpu_share: str = "on"
    # AIPTRAIN_LOCAL_METADATA: `on` (each job has its VM's metadata server, and its replicas see none
    # of the submitter's credentials) or `off` (no metadata server; the replicas keep the submitter's
    # GOOGLE_APPLICATION_CREDENTIALS and gcloud configuration).
    metadata: str = "on"

    @property
    def sizes_threads(self) -> bool:
        return self.cpu_share != "off"

    @property
    def pins_cores(self) -> bool:
        return self.cpu_share == "on"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ReplicaSettings:
        source = os.environ if env is None else env
        cap_raw = source.get("AIPTRAIN_LOCAL_REPLICA_CAP", "").strip()
        return cls(
            max_running=_int_setting(source, "AIPTRAIN_LOCAL_MAX_RUNNING", _default_max_running(), 1),
            max_restarts=_int_setting(source, "AIPTRAIN_LOCAL_MAX_RESTARTS", 3, 0),
            restart_delay=_seconds_setting(source, "AIPTRAIN_LOCAL_RESTART_DELAY", 1.0),
            kill_grace=_seconds_setting(source, "AIPTRAIN_LOCAL_KILL_GRACE", 5.0),
            evaluator_grace=_seconds_setting(source, "AIPTRAIN_LOCAL_EVALUATOR_GRACE", 60.0),
            replica_cap=_int_setting(source, "AIPTRAIN_LOCAL_REPLICA_CAP", 0, 1) if cap_raw else None,
            python=source.get("AIPTRAIN_LOCAL_PYTHON", "").strip() or sys.executable,
            python_override=bool(source.get("AIPTRAIN_LOCAL_PYTHON", "").strip()),
            gcs=choice_setting(source, "AIPTRAIN_LOCAL_GCS", ("endpoint", "rewrite")),
            cpu_share=choice_setting(source, "AIPTRAIN_LOCAL_CPU_SHARE", ("on", "threads", "off")),
            metadata=choice_setting(source, "AIPTRAIN_LOCAL_METADATA", ("on", "off")),
        )
