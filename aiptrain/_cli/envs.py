"""`aiptrain local envs ...`: the runtime environments local jobs run in (list, build, rm)."""

from __future__ import annotations

import time
from typing import Any

import click

from aiptrain._cli.context import AppContext, common_options, global_options


def _store() -> Any:
    from aiptrain._environments.store import EnvironmentStore, envs_dir
    from aiptrain._paths import aiptrain_home

    return EnvironmentStore(envs_dir(aiptrain_home()))


def _runtimes_by_environment() -> dict[str, list[str]]:
    """Environment name -> the runtime versions that run in it: each runtime its own
    (`runtime-1.15`), and the fallback set every runtime can fall back to."""
    from aiptrain._job.catalog import load_catalog

    found: dict[str, list[str]] = {}
    for runtime in load_catalog().runtimes.values():
        found[f"runtime-{runtime.version}"] = [runtime.version]
        found.setdefault(runtime.local_environment, []).append(runtime.version)
    return found


def _size(count: int) -> str:
    return f"{count / 1e9:.2f} GB" if count >= 1e9 else f"{count / 1e6:.0f} MB"


def _version_span(versions: list[str]) -> str:
    return f"{versions[0]} .. {versions[-1]}" if len(versions) > 2 else ", ".join(versions)


def _labelled(line: str, severity: str) -> str:
    return f"warning: {line}" if severity == "WARNING" else line


@click.group("envs")
@global_options
def envs() -> None:
    """The runtime environments local jobs run in ($AIPTRAIN_HOME/envs): list, build, rm."""


@envs.command("list")
@common_options
def list_envs(app: AppContext) -> int:
    """Built environments: runtimes served, TensorFlow, size, last use, and whether files are missing."""
    from aiptrain._cli.output import emit, table

    runtimes = _runtimes_by_environment()
    rows = []
    for info in _store().entries():
        rows.append({
            "key": info.environment.key,
            "name": info.name,
            "runtimeVersions": runtimes.get(info.name, []),
            "python": info.python,
            "packages": info.packages,
            "sizeBytes": info.size_bytes,
            "ownBytes": info.own_bytes,
            "lastUsed": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(info.last_used)),
            "path": str(info.environment.root),
            "health": "healthy" if info.damage is None else f"damaged: {info.damage}; the next job rebuilds it",
        })
    text = table(
        [[r["key"], r["name"], _version_span(r["runtimeVersions"]), r["python"],
          f"{_size(r['sizeBytes'])} ({_size(r['ownBytes'])} own)", r["lastUsed"],
          "healthy" if r["health"] == "healthy" else "DAMAGED"] for r in rows],
        ["KEY", "PACKAGE SET", "RUNTIMES", "PYTHON", "SIZE", "LAST USED", "HEALTH"],
    ) if rows else "No runtime environments built yet; `aiptrain local envs build RUNTIME` builds one."
    emit(rows, app.output_format, text=text, many=True)
    return 0


@envs.command("build")
@click.argument("runtime_version")
@click.option("--python-version", help="Build it for this Python (default: the runtime's, as the service chose).")
@common_options
def build_env(app: AppContext, runtime_version: str, python_version: str | None) -> int:
    """Build the environment of RUNTIME_VERSION now (e.g. before going offline); print its path."""
    from aiptrain._environments.for_job import environment_in_foreground
    from aiptrain._job.catalog import load_catalog
    from aiptrain._paths import aiptrain_home

    environment = environment_in_foreground(runtime_version, load_catalog(), aiptrain_home(),
                                            lambda line, severity: app.progress(_labelled(line, severity)),
                                            python=python_version)
    click.echo(environment.root)
    return 0


@envs.command("rm")
@click.argument("targets", nargs=-1)
@click.option("--all", "remove_all", is_flag=True, help="Remove every environment.")
@common_options
def remove_envs(app: AppContext, targets: tuple[str, ...], remove_all: bool) -> int:
    """Remove environments by KEY or by RUNTIME_VERSION (the next job that needs one rebuilds it)."""
    from aiptrain._environments.resolution import resolve_version
    from aiptrain._job.catalog import load_catalog
    from aiptrain.errors import UsageError

    if not targets and not remove_all:
        raise UsageError("nothing to remove", hint="name environments by KEY or runtime version, or pass --all")
    store = _store()
    wanted = {info.environment.key: info.environment.key for info in store.entries()} if remove_all else {}
    catalog = load_catalog()
    for target in targets:
        resolution = resolve_version(target, catalog)
        wanted[store.key_for(resolution) if resolution is not None else target] = target
    missing = []
    for key, label in wanted.items():
        if store.remove(key):
            app.progress(f"Removed {store.root / key}")
        else:
            missing.append(label)
    if missing and not remove_all:
        raise UsageError("no such environment: " + ", ".join(missing),
                         hint="`aiptrain local envs list` shows the built ones")
    return 0
