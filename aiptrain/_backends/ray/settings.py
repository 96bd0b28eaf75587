"""Where the Ray cluster is and how jobs are fitted onto it, from flags and the environment.

The address is the Ray Jobs API (the dashboard URL, `http://HEAD:8265`), from `--ray-address`,
`AIPTRAIN_RAY_ADDRESS` or Ray's own `RAY_ADDRESS`, in that order. A bare `HOST:PORT` means http.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from aiptrain.errors import UsageError

DEFAULT_DASHBOARD_PORT = 8265
# Ports of a Ray cluster that are not its Jobs API: the GCS and the Ray Client server.
_NOT_JOBS_API_PORTS = {6379: "the GCS port", 10001: "the Ray Client port"}
ADDRESS_HINT = (
    f"pass --ray-address http://HEAD:{DEFAULT_DASHBOARD_PORT} (the Ray dashboard, which serves the Jobs API) "
    "or set AIPTRAIN_RAY_ADDRESS; start a cluster with `ray start --head`"
)
SCALE_VARIABLE = "AIPTRAIN_RAY_RESOURCE_SCALE"
# How the replicas get the runtime version's environment: `build` (the default), aiptrain's own
# builder on each replica's node (the local backend's: uv, the runtime's own Python, one build per
# node under a lock, kept in the node's cache); or `cluster`, the cluster's own Python as it is, for
# clusters whose image already has the packages (as AIPTRAIN_LOCAL_PYTHON does locally). `pip` and
# `uv`, which once chose Ray's runtime_env plugins (they raced when two nodes shared Ray's temp
# dir), are read as `build`, with a note in the job's log.
PACKAGES_VARIABLE = "AIPTRAIN_RAY_RUNTIME_PACKAGES"
PACKAGE_MODES = ("build", "cluster")
_RETIRED_MODES = ("pip", "uv")
# Read on each node, from the environment `ray start` ran with: where its environments are kept.
CACHE_VARIABLE = "AIPTRAIN_RAY_CACHE_DIR"
DEFAULT_NODE_CACHE = "~/.cache/aiptrain/ray"
# `off` lets a replica larger than every node the cluster has now wait QUEUED (an autoscaler that
# adds bigger nodes, worker groups that start at zero); by default such a job is refused at submit.
FIT_CHECK_VARIABLE = "AIPTRAIN_RAY_FIT_CHECK"


@dataclass(frozen=True)
class RaySettings:
    address: str  # http(s)://HOST:PORT of the Jobs API
    # Every bundle's CPUs and memory are multiplied by this (1: exactly the machine type's).
    resource_scale: float = 1.0


def jobs_api_address(given: str | None, env: Mapping[str, str] | None = None) -> str:
    """The Jobs API URL from the flag or the environment; UsageError if none or malformed."""
    source = os.environ if env is None else env
    raw = (given or source.get("AIPTRAIN_RAY_ADDRESS") or source.get("RAY_ADDRESS") or "").strip()
    if not raw:
        raise UsageError("the ray backend needs the address of a Ray cluster", hint=ADDRESS_HINT)
    if raw.startswith("ray://"):
        raise UsageError(f"{raw!r} is a Ray Client address; jobs are submitted through the Jobs API",
                         hint=ADDRESS_HINT)
    url = raw if "://" in raw else f"http://{raw}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{raw!r} is not an http(s) address of a Ray cluster", hint=ADDRESS_HINT)
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"{raw!r} has an invalid port", hint=ADDRESS_HINT) from None
    if port in _NOT_JOBS_API_PORTS:
        raise UsageError(f"{raw!r} is {_NOT_JOBS_API_PORTS[port]} of a Ray cluster, not its Jobs API",
                         hint=ADDRESS_HINT)
    return url.rstrip("/")


def resource_scale(given: float | None, env: Mapping[str, str] | None = None) -> float:
    """--ray-resource-scale / AIPTRAIN_RAY_RESOURCE_SCALE: a factor in (0, 1]; 1 when unset."""
    source = os.environ if env is None else env
    if given is None:
        raw = source.get(SCALE_VARIABLE, "").strip()
        if not raw:
            return 1.0
        try:
            given = float(raw)
        except ValueError:
            raise UsageError(f"{SCALE_VARIABLE}={raw!r} is not a number",
                             hint=f"set {SCALE_VARIABLE} to a factor such as 0.25") from None
    if not 0 < given <= 1:
        raise UsageError(f"the Ray resource scale {given:g} is not in (0, 1]",
                         hint="pass --ray-resource-scale 0.25 to reserve a quarter of each machine type")
    return given


def runtime_packages_mode(env: Mapping[str, str] | None = None) -> str:
    """AIPTRAIN_RAY_RUNTIME_PACKAGES: build (default; also for pip and uv) or cluster; UsageError otherwise."""
    source = os.environ if env is None else env
    mode = source.get(PACKAGES_VARIABLE, "").strip().lower() or PACKAGE_MODES[0]
    if mode in _RETIRED_MODES:
        return PACKAGE_MODES[0]
    if mode not in PACKAGE_MODES:
        raise UsageError(f"{PACKAGES_VARIABLE}={mode!r} is not one of {', '.join(PACKAGE_MODES)}",
                         hint=f"set {PACKAGES_VARIABLE}=cluster when the cluster's Python already has the "
                              "runtime's packages, or leave it unset to build the runtime's environment on each node")
    return mode


def runtime_packages_note(env: Mapping[str, str] | None = None) -> str | None:
    """The log's note when AIPTRAIN_RAY_RUNTIME_PACKAGES names a retired mode (pip, uv), else None."""
    source = os.environ if env is None else env
    mode = source.get(PACKAGES_VARIABLE, "").strip().lower()
    if mode not in _RETIRED_MODES:
        return None
    return (f"{PACKAGES_VARIABLE}={mode} is read as `build`: the runtime's environment is built by aiptrain on each "
            f"node (with uv, once per node) instead of by Ray's {mode} runtime_env plugin; unset the variable to "
            "silence this note.")


def fit_check(env: Mapping[str, str] | None = None) -> bool:
    """AIPTRAIN_RAY_FIT_CHECK: on (default) or off."""
    source = os.environ if env is None else env
    raw = source.get(FIT_CHECK_VARIABLE, "").strip().lower() or "on"
    if raw not in ("on", "off"):
        raise UsageError(f"{FIT_CHECK_VARIABLE}={raw!r} is not on or off",
                         hint=f"set {FIT_CHECK_VARIABLE}=off when the cluster's autoscaler adds nodes larger "
                              "than the ones it has now")
    return raw == "on"


def node_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """A node's cache (its runtime environments, its installed trainer packages): AIPTRAIN_RAY_CACHE_DIR,
    else `aiptrain/ray` under XDG_CACHE_HOME (~/.cache), kept across jobs and cluster restarts."""
    source = os.environ if env is None else env
    configured = source.get(CACHE_VARIABLE, "").strip()
    if configured:
        return Path(configured).expanduser()
    cache_home = source.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache_home) / "aiptrain" / "ray"


def ray_settings(address: str | None, scale: float | None) -> RaySettings:
    return RaySettings(jobs_api_address(address), resource_scale(scale))
