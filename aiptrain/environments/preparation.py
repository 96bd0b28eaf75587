"""PREPARING: installing a job's staged trainer package(s) into its own site directory.

On a runtime environment (the default), each package is installed as the service did, with its
`install_requires`, resolved against the environment by uv (`envs.trainer_install`). With
AIPTRAIN_LOCAL_PYTHON, `pip install --no-deps --no-index --no-build-isolation --target DIR
PACKAGE`: nothing is downloaded and dependencies come from that interpreter's environment.
Either way the job's code never touches a shared environment, and two jobs with different
versions of one package do not see each other's.

Each package is installed once per (package bytes, environment or interpreter) into the install
cache (`install_cache`), and every job's site directory is filled from there, so only the first
job with a given package pays for the install.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from aiptrain.environments import install_cache, trainer_install
from aiptrain.environments.for_job import interpreter_problem
from aiptrain.environments.store import Environment
from aiptrain.environments.uv import uv_environment
from aiptrain.errors import UsageError
from aiptrain.replicas.gs_paths import GS_PREFIX
from aiptrain.replicas.log_capture import SERVICE_TASK, LogSink, OutputTail, pump_stream
from aiptrain.replicas.processes import TOKEN_VARIABLE, describe_returncode, start_process, stop_processes
from aiptrain.storage.local import local_path_for


@dataclass(frozen=True)
class CommandResult:
    returncode: int | None  # None: stopped because the job was cancelled
    tail: list[str]


def package_path(uri: str, storage_root: Path) -> Path:
    """The file behind a packageUris entry: gs:// in the local store, or an absolute local path."""
    if uri.startswith(GS_PREFIX):
        return local_path_for(uri, storage_root)
    path = Path(uri.removeprefix("file://"))
    if not path.is_absolute():
        raise UsageError(
            f"the package {uri!r} is a relative path",
            hint="give packageUris as gs:// URIs (staged in the local store) or absolute paths",
        )
    return path


def run_logged_command(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    sink: LogSink,
    stop: threading.Event,
    kill_grace: float,
    task_name: str = SERVICE_TASK,
) -> CommandResult:
    """Run a helper command, logging each output line under `task_name`; stop it on `stop`."""
    tail = OutputTail()
    process = start_process(argv, env=env, cwd=cwd)
    pumps = [
        threading.Thread(
            target=pump_stream,
            args=(stream,),
            kwargs={"task_name": task_name, "from_stderr": from_stderr, "sink": sink, "tail": tail},
            daemon=True,
        )
        for stream, from_stderr in ((process.popen.stdout, False), (process.popen.stderr, True))
    ]
    for pump in pumps:
        pump.start()
    try:
        while not process.has_exited():
            if stop.wait(0.05):
                stop_processes([process], kill_grace)
                return CommandResult(None, tail.lines())
        returncode = process.reap()
    finally:
        if process.popen.returncode is None:
            stop_processes([process], kill_grace)
        for pump in pumps:
            pump.join(2.0)
    return CommandResult(returncode, tail.lines())


def install_packages(
    package_uris: list[str],
    *,
    site_dir: Path,
    storage_root: Path,
    python: str,
    base_env: dict[str, str],
    run_token: str,
    sink: LogSink,
    stop: threading.Event,
    kill_grace: float,
    cache_dir: Path | None = None,
    environment: Environment | None = None,
) -> str | None:
    """Install the packages into `site_dir`; None on success, else the job's errorMessage.

    With `environment`, each package comes with its dependencies, resolved against it (and
    `python` is the environment's); without, it is installed alone with `python`'s pip.

    Raises nothing for a user mistake (a missing package is the job's failure, not ours), but
    returns a message saying what is missing and where it was looked for. A cancelled install
    returns None too; the caller sees `stop` set. `cache_dir` defaults to the install cache of
    the home that `storage_root` ($AIPTRAIN_HOME/storage) belongs to.
    """
    paths: list[Path] = []
    for uri in package_uris:
        try:
            path = package_path(uri, storage_root)
        except UsageError as error:
            return f"The package {uri} cannot be installed: {error.message} ({error.hint})"
        if not path.is_file():
            where = f" (looked for {path})" if uri.startswith(GS_PREFIX) else ""
            return (
                f"The package {uri} does not exist{where}. Stage it with `aiptrain jobs submit "
                "training --package-path ...` or upload it to the local store first."
            )
        paths.append(path)
    site_dir.mkdir(parents=True, exist_ok=True)
    if not paths:
        sink.emit(SERVICE_TASK, "INFO", "No packages to install; the module must be importable as is.")
        return None
    cache = cache_dir if cache_dir is not None else install_cache.install_cache_dir(storage_root.parent)
    try:
        installer = "uv-with-dependencies" if environment is not None else "pip-no-deps"
        keys = [install_cache.cache_key(path, python, installer=installer) for path in paths]
    except OSError as error:
        return f"Reading the package(s) to install failed: {error}"
    entries = [install_cache.lookup(cache, key) for key in keys]
    for uri, entry in zip(package_uris, entries, strict=True):
        if entry is not None:
            sink.emit(SERVICE_TASK, "INFO", f"Reusing installed package {uri} (cached)")
    missing = [index for index, entry in enumerate(entries) if entry is None]
    if missing:
        sink.emit(SERVICE_TASK, "INFO", "Installing package(s): " + ", ".join(package_uris[i] for i in missing))
    env = dict(base_env)
    env[TOKEN_VARIABLE] = run_token
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    for index in missing:
        outcome = _install_into_cache(
            paths[index], keys[index], cache, python=python, env=env, sink=sink, stop=stop, kill_grace=kill_grace,
            environment=environment,
        )
        if not isinstance(outcome, install_cache.CachedInstall):
            return outcome  # the job's error message, or None when cancelled
        entries[index] = outcome
    try:
        install_cache.copy_into_site([entry for entry in entries if entry is not None], site_dir)
    except OSError as error:
        return f"Copying the installed package(s) into {site_dir} failed: {error}"
    return None


# Characters a requirement parser reads as syntax even in a file's path (see `_readable_as_a_file`).
_REQUIREMENT_SYNTAX = frozenset(";#")


def _install_into_cache(
    package: Path,
    key: str,
    cache: Path,
    *,
    python: str,
    env: dict[str, str],
    sink: LogSink,
    stop: threading.Event,
    kill_grace: float,
    environment: Environment | None = None,
) -> install_cache.CachedInstall | str | None:
    """Install one package as the cache entry `key`: the entry, else the job's error message,
    or None when the job was cancelled meanwhile."""
    try:
        staging = install_cache.new_staging(cache, key)
    except OSError as error:
        return f"Cannot write the install cache {cache}: {error}"
    try:
        with _readable_as_a_file(package) as readable:
            return _install_staged(readable, key, cache, staging, python=python, env=env, sink=sink, stop=stop,
                                   kill_grace=kill_grace, environment=environment)
    finally:
        install_cache.discard(staging)  # gone already when it was published


@contextlib.contextmanager
def _readable_as_a_file(package: Path) -> Iterator[Path]:
    """`package` at a path that pip and uv take for a file. Both parse a requirement, so a `;` starts
    an environment marker and a `#` a comment even inside a path ($AIPTRAIN_HOME may hold either):
    such a package is linked (or copied) into a temporary directory for the install."""
    if not set(str(package)) & _REQUIREMENT_SYNTAX:
        yield package
        return
    with tempfile.TemporaryDirectory(prefix="aiptrain-package-") as scratch:
        plain = Path(scratch) / package.name
        try:
            os.link(package, plain)
        except OSError:
            shutil.copyfile(package, plain)
        yield plain


def _install_staged(
    package: Path,
    key: str,
    cache: Path,
    staging: Path,
    *,
    python: str,
    env: dict[str, str],
    sink: LogSink,
    stop: threading.Event,
    kill_grace: float,
    environment: Environment | None,
) -> install_cache.CachedInstall | str | None:
    """`_install_into_cache` once its staging directory exists (discarded by the caller)."""
    site = install_cache.staging_site(staging)
    if environment is not None:
        outcome = _install_with_dependencies(
            package, environment, site, staging, env=env, sink=sink, stop=stop, kill_grace=kill_grace
        )
        if not isinstance(outcome, bool):
            return outcome
        description = {"package": package.name, "environment": environment.key}
    else:
        problem = interpreter_problem(python)
        if problem:
            return problem
        argv = [
            python, "-m", "pip", "install", "--no-deps", "--no-index", "--no-build-isolation",
            "--no-input", "--quiet", "--target", str(site), str(package),
        ]
        result = run_logged_command(argv, env=env, cwd=staging, sink=sink, stop=stop, kill_grace=kill_grace)
        if result.returncode is None:
            return None
        if result.returncode != 0:
            message = f"Installing the package(s) with pip failed: pip {describe_returncode(result.returncode)}."
            if result.tail:
                message += " Its last error lines:\n" + "\n".join(result.tail)
            return message
        description = {"package": package.name, "python": install_cache.interpreter_identity(python)}
    try:
        return install_cache.publish(staging, cache, key, description)
    except OSError as error:
        return f"Cannot write the install cache {cache}: {error}"


def _install_with_dependencies(
    package: Path,
    environment: Environment,
    site: Path,
    staging: Path,
    *,
    env: dict[str, str],
    sink: LogSink,
    stop: threading.Event,
    kill_grace: float,
) -> Literal[True] | str | None:
    """uv-install `package` and what it requires into `site`: True, the job's error message, or
    None when cancelled. Pins that conflict with the runtime's versions get their own; what uv
    refuses and the era's pip accepted is installed with the environment's pip."""
    overrides = trainer_install.overrides_file(staging)
    uv_env = uv_environment(env)
    installers = [("uv", True), ("uv", False)]
    while installers:
        tool, constrained = installers.pop(0)
        if tool == "uv":
            argv = trainer_install.install_argv(package, environment, site, overrides, constrained=constrained)
        else:
            argv = trainer_install.pip_argv(package, environment, site, constrained=constrained)
        result = run_logged_command(argv, env=uv_env, cwd=staging, sink=sink, stop=stop, kill_grace=kill_grace)
        if result.returncode is None:
            return None
        if result.returncode == 0:
            break
        mismatch = trainer_install.python_mismatch(result.tail, environment)
        if mismatch is not None:
            return f"Installing the trainer package {package.name} failed: {mismatch}."
        shutil.rmtree(site, ignore_errors=True)
        if tool == "uv" and trainer_install.uv_refused(result.tail):
            sink.emit(SERVICE_TASK, "INFO", f"uv cannot install {package.name}'s requirements (" +
                      trainer_install.failure_reason_line(result.tail) + "); installing it with the runtime's own "
                      "pip, as the service did.")
            installers = [("pip", True), ("pip", False)]
        elif constrained and (tool == "pip" or trainer_install.is_resolution_conflict(result.tail)):
            sink.emit(SERVICE_TASK, "INFO", f"{package.name} pins versions other than the runtime's; "
                      "installing its own versions beside the runtime's.")
        else:
            return trainer_install.failure_message(package, environment, result.tail)
    else:
        return trainer_install.failure_message(package, environment, result.tail)
    provided = trainer_install.prune_provided(site, environment)
    if provided:
        sink.emit(SERVICE_TASK, "INFO", f"{package.name}: already in the runtime: " + ", ".join(provided))
    return True
