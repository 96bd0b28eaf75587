"""Runtime environments on disk: `$AIPTRAIN_HOME/envs/<key>/`, one per (package set, Python).

    envs/<key>/                  a virtual environment built by `uv venv` + `uv pip install`
    envs/<key>/aiptrain-env.json what it holds (recipe, packages, Python, the day, build time)
    envs/<key>/aiptrain-uv.toml  uv's configuration for it: the runtime's reading of metadata uv cannot parse
    envs/<key>/constraints.txt   its exact package versions (`uv pip freeze`)
    envs/.logs/<key>.log         the output of its last build (kept whether it worked or not)
    envs/.logs/builds.jsonl      one line per completed build: which, where, how long
    envs/.locks/<key>.lock       held while it is built

A runtime's environment is built as of the runtime's day (`RuntimeResolution.cutoff`): uv takes no
file uploaded after it (`--exclude-newer`, an instant in UTC), so the packages the set leaves open
are those the image's pip found then (protobuf 3.14 for runtime 1.15, never protobuf 4). The build
tools uv fetches to build an old sdist are exempt: an isolated build needs a setuptools newer than
the oldest runtimes. Where a pinned package's own metadata has a requirement uv cannot parse (pandas
before 0.25), uv is given the catalog's reading of it (`dependency_metadata`, in the environment's
`aiptrain-uv.toml`, which trainer installs use too).

The key hashes the package list, the day, that metadata and the base interpreter (its path and the
identity of its binary), so a changed package set, a moved day or a rebuilt Python is another
environment, and an existing one is never changed in place. Environments are seeded with that
Python's own pip and setuptools, so a trainer whose requirements uv refuses can still be installed
the way the service did (with pip). A build goes into `.tmp-<key>-*` beside the final directory and is
renamed into place once complete (with its manifest written last), so a killed build leaves
nothing a later job would use; the next build under the lock removes it. Two jobs that need the
same environment take the lock in turn: the second finds the first one's result.

A Python 2.7 environment is made by virtualenv and installed by the pip of its day from the index
of the runtime's day instead (`virtualenv_build`: uv drives Python 3 only); everything else here
holds for it alike.

Once built, an environment is used offline. uv links files from its cache (hard links on one
file system), so an environment costs little disk beyond the cache itself. Environments unused
for AIPTRAIN_CACHE_MAX_AGE_DAYS are removed when another one is built, like the install cache.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiptrain._cache_eviction import mark_used, remove_unused
from aiptrain._environments import virtualenv_build
from aiptrain._environments.dated_index import DatedIndex
from aiptrain._environments.index_files import IndexFiles
from aiptrain._environments.pip_config import pip_environment, pip_settings
from aiptrain._environments.resolution import RuntimeResolution, package_label
from aiptrain._environments.stall import StallWatch, once_more_if_stalled, stall_limit
from aiptrain._environments.uv import environment_python, failure_reason, uv_binary, uv_environment
from aiptrain._job.era import first_instant_after
from aiptrain._paths import HomeLayout
from aiptrain._replicas.processes import dying_with_this_thread

ENVS_SETTING = "AIPTRAIN_ENVS_DIR"
_REVISION = "2"
_MANIFEST = "aiptrain-env.json"
_CONSTRAINTS = "constraints.txt"
_UV_CONFIG = "aiptrain-uv.toml"
# Built from sdists with the tools of today: old sdists need a setuptools newer than the oldest days.
_BUILD_TOOLS = ("setuptools", "wheel")
_STAGING_PREFIX = ".tmp-"
_LOCK_POLL_SECONDS = 0.2

Progress = Callable[[str], None]
# Where a caller of `ensure` is: "waiting" (another process holds the build lock), "building".
Phase = Callable[[str], None]
BUILDS_RECORD = "builds.jsonl"


class EnvironmentBuildFailed(Exception):
    """A build that did not complete; `message` is the job's errorMessage."""

    def __init__(self, message: str, log: Path | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.log = log


class BuildCancelled(Exception):
    """The job was cancelled while its environment was being built or waited for."""


@dataclass(frozen=True)
class Environment:
    key: str
    root: Path

    @property
    def python(self) -> str:
        return environment_python(self.root)

    @property
    def constraints(self) -> Path:
        return self.root / _CONSTRAINTS

    @property
    def uv_config(self) -> Path:
        """uv's configuration for installs into or on top of this environment (may be absent)."""
        return self.root / _UV_CONFIG

    def dependency_metadata(self) -> dict[str, tuple[str, ...]]:
        """The catalog's reading of metadata uv cannot parse, for this environment's packages."""
        raw = self.manifest().get("dependency_metadata") or {}
        return {str(pin): tuple(str(r) for r in requires) for pin, requires in raw.items()}

    @property
    def stands_in(self) -> bool:
        """Whether this is the fallback environment, standing in for a runtime it is not."""
        manifest = self.manifest()
        return bool(manifest.get("fallback", not str(manifest.get("name", "")).startswith("runtime-")))

    def manifest(self) -> dict[str, Any]:
        data = json.loads((self.root / _MANIFEST).read_text())
        return data if isinstance(data, dict) else {}

    @property
    def python2(self) -> bool:
        """Whether this is a Python 2.7 environment, which pip installs into (`virtualenv_build`)."""
        return virtualenv_build.is_python2(str(self.manifest().get("python_version", "")))

    @property
    def tools(self) -> Path:
        """Where the tools that built it are (virtualenv, for a Python 2.7 environment's throw-away ones)."""
        return Path(str(self.manifest().get("tools") or HomeLayout(self.root.parent.parent).tools))

    def installed(self) -> dict[str, str]:
        """Normalised distribution name -> version, as built."""
        return {str(k): str(v) for k, v in self.manifest().get("installed", {}).items()}


@dataclass(frozen=True)
class EnvironmentInfo:
    """One line of `aiptrain local envs list`."""

    environment: Environment
    name: str
    packages: list[str]
    python: str
    size_bytes: int  # apparent size of its files
    own_bytes: int  # of which not hard-linked elsewhere (uv's cache keeps the rest)
    last_used: float
    damage: str | None = None  # files deleted or changed since its build (`damage_of`): rebuilt on next use


def envs_dir(home: Path, env: dict[str, str] | None = None) -> Path:
    """$AIPTRAIN_ENVS_DIR, else `$AIPTRAIN_HOME/envs`."""
    source = os.environ if env is None else env
    override = source.get(ENVS_SETTING, "").strip()
    return Path(override) if override else HomeLayout(home).envs


def normalise_name(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


def effective_packages(resolution: RuntimeResolution) -> list[str]:
    """The resolution's packages, with the GPU variants where this machine has an NVIDIA GPU."""
    packages = list(resolution.packages)
    if Path("/dev/nvidia0").exists():
        packages = [resolution.gpu_packages.get(p, p) for p in packages]
    return packages


def environment_key(packages: list[str], python: str, *, cutoff: str = "",
                    dependency_metadata: dict[str, tuple[str, ...]] | None = None, builder: str = "") -> str:
    try:
        stat = os.stat(python)
        stamp = f"{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}"
    except OSError:
        stamp = "missing"
    identity = {"revision": _REVISION, "packages": packages, "python": python, "binary": stamp, "cutoff": cutoff,
                "dependency_metadata": {k: list(v) for k, v in (dependency_metadata or {}).items()},
                "build_tools_exempt": list(_BUILD_TOOLS)}
    if builder:  # uv's builds leave it out, so their keys stay what they were
        identity["builder"] = builder
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


def as_of_arguments(cutoff: str) -> list[str]:
    """uv's arguments that build an environment as of `cutoff` (none for "": today's index)."""
    if not cutoff:
        return []
    exempt = [argument for tool in _BUILD_TOOLS for argument in ("--exclude-newer-package", f"{tool}=false")]
    return ["--exclude-newer", first_instant_after(datetime.date.fromisoformat(cutoff)), *exempt]


def uv_config_text(dependency_metadata: Mapping[str, Sequence[str]]) -> str:
    """uv's `dependency-metadata` entries (TOML) for packages whose own metadata it cannot parse."""
    entries = []
    for pin, requires in sorted(dependency_metadata.items()):
        name, _, version = pin.partition("==")
        entries.append(f"[[dependency-metadata]]\nname = {json.dumps(name)}\nversion = {json.dumps(version)}\n"
                       f"requires-dist = {json.dumps(list(requires))}\n")
    return "\n".join(entries)


class EnvironmentStore:
    def __init__(self, root: Path, tools: Path | None = None) -> None:
        self.root = root
        # The tools a build installs (virtualenv): the home's `tools` beside its `envs` by default.
        self.tools = tools if tools is not None else HomeLayout(root.parent).tools

    def log_path(self, key: str) -> Path:
        return self.root / ".logs" / f"{key}.log"

    def key_for(self, resolution: RuntimeResolution) -> str:
        return environment_key(effective_packages(resolution), _interpreter_of(resolution), cutoff=resolution.cutoff,
                               dependency_metadata=resolution.dependency_metadata, builder=_builder(resolution))

    def find(self, resolution: RuntimeResolution) -> Environment | None:
        """The built environment of `resolution` (now marked used), or None."""
        environment = Environment(self.key_for(resolution), self.root / self.key_for(resolution))
        if not _is_complete(environment):
            return None
        mark_used(environment.root)
        return environment

    def ensure(
        self,
        resolution: RuntimeResolution,
        *,
        progress: Progress,
        stop: threading.Event | None = None,
        extra_env: dict[str, str] | None = None,
        phase: Phase | None = None,
    ) -> Environment:
        """The environment of `resolution`, built first if needed (once, under a lock).

        `phase` hears "waiting" when another process holds the lock, "building" when this one
        builds. Raises EnvironmentBuildFailed with the resolver's reason, or BuildCancelled on `stop`.
        """
        found = self.find(resolution)
        if found is not None and damage_of(found) is None:
            return found
        packages = effective_packages(resolution)
        key = self.key_for(resolution)
        with self._lock(key, progress, stop, phase):
            found = self.find(resolution)
            if found is not None:
                damage = damage_of(found)
                if damage is None:
                    progress(f"Using the runtime {resolution.version} environment another job just built.")
                    return found
                progress(f"The runtime {resolution.version} environment at {found.root} is damaged ({damage}); "
                         "rebuilding it.")
            if phase is not None:
                phase("building")
            return self._build(resolution, key, packages, progress, stop, extra_env or {})

    def builds(self) -> list[dict[str, Any]]:
        """Every completed build recorded under this store, oldest first."""
        try:
            text = (self.root / ".logs" / BUILDS_RECORD).read_text(encoding="utf-8")
        except OSError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def entries(self) -> list[EnvironmentInfo]:
        found = []
        for item in sorted(self.root.glob("*")) if self.root.is_dir() else []:
            environment = Environment(item.name, item)
            if item.name.startswith(".") or not _is_complete(environment):
                continue
            manifest = environment.manifest()
            size, own = _disk_usage(item)
            found.append(EnvironmentInfo(
                environment=environment,
                name=str(manifest.get("name", "")),
                packages=[str(p) for p in manifest.get("packages", [])],
                python=str(manifest.get("python_version", "")),
                size_bytes=size,
                own_bytes=own,
                last_used=item.stat().st_mtime,
                damage=damage_of(environment),
            ))
        return found

    def remove(self, key: str) -> bool:
        """Remove one environment; False if there is none by that key. A job starting on it
        meanwhile fails to start its replicas, so remove environments while no job runs."""
        target = self.root / key
        if key.startswith(".") or "/" in key or not target.is_dir():
            return False
        doomed = target.with_name(f"{_STAGING_PREFIX}rm-{key}-{os.getpid()}")
        target.rename(doomed)  # gone from view at once; the slow delete follows
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    # -- building ----------------------------------------------------------------------------

    def _lock(self, key: str, progress: Progress, stop: threading.Event | None, phase: Phase | None) -> _HeldLock:
        locks = self.root / ".locks"
        locks.mkdir(parents=True, exist_ok=True)
        handle = (locks / f"{key}.lock").open("a+")
        announced = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return _HeldLock(handle)
            except BlockingIOError:
                if not announced:
                    progress("Waiting for another job that is building the same runtime environment ...")
                    if phase is not None:
                        phase("waiting")
                    announced = True
            if stop is not None and stop.wait(_LOCK_POLL_SECONDS):
                handle.close()
                raise BuildCancelled
            if stop is None:
                time.sleep(_LOCK_POLL_SECONDS)

    def _build(
        self,
        resolution: RuntimeResolution,
        key: str,
        packages: list[str],
        progress: Progress,
        stop: threading.Event | None,
        extra_env: dict[str, str],
    ) -> Environment:
        for stale in self.root.glob(f"{_STAGING_PREFIX}{key}-*"):
            shutil.rmtree(stale, ignore_errors=True)  # a killed build: we hold the lock, it is dead
        log_path = self.log_path(key)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=self.root, prefix=f"{_STAGING_PREFIX}{key}-"))
        as_of = f" as of {resolution.cutoff}" if resolution.cutoff else ""
        progress(f"Building runtime {resolution.version} on Python {resolution.python}{as_of}: "
                 + ", ".join(package_label(p) for p in packages) + f" (log: {log_path})")
        base_env = {**os.environ, **extra_env}
        progress(pip_settings(base_env).describe())
        started = time.monotonic()
        uv = uv_binary()
        env = uv_environment(base_env)
        limit = stall_limit(env)
        python = _interpreter_of(resolution)
        config = staging / _UV_CONFIG
        python2 = virtualenv_build.is_python2(resolution.python)
        try:
            with log_path.open("w", encoding="utf-8") as log, contextlib.ExitStack() as stack:
                steps, env = (self._python2_steps(resolution, python, staging, packages, base_env, stack, progress)
                              if python2 else (_uv_steps(resolution, python, staging, packages, config), env))
                for argv in steps:
                    if "--config-file" in argv:  # uv venv wants an empty directory: written after it
                        config.write_text(uv_config_text(resolution.dependency_metadata))
                    step_env = virtualenv_build.tool_environment(env) if argv is steps[0] and python2 else env
                    lines = once_more_if_stalled(
                        functools.partial(_run, argv, env=step_env, log=log, progress=progress, stop=stop,
                                          limit=limit),
                        lambda outcome: outcome.reason if isinstance(outcome, _Stalled) else None,
                        lambda line: _say_in_log(line, log, progress))
                    if isinstance(lines, _Stalled):
                        raise EnvironmentBuildFailed(
                            f"Building the environment of runtime {resolution.version} failed: {lines.reason} "
                            f"(it stalled twice; full log: {log_path}).", log_path,
                        )
                    if lines is None:
                        raise BuildCancelled
                    if lines[0] != 0:
                        tool = ("virtualenv" if argv is steps[0] else "pip") if python2 else "uv"
                        reason = _killed(lines[0], tool) or (
                            virtualenv_build.failure_reason(lines[1]) if python2 else failure_reason(lines[1]))
                        raise EnvironmentBuildFailed(
                            f"Building the environment of runtime {resolution.version} failed: {reason} "
                            f"(full log: {log_path}).", log_path,
                        )
                frozen = virtualenv_build.freeze(staging, env) if python2 else subprocess.run(
                    [uv, "pip", "freeze", "--python", environment_python(staging)],
                    env=env, capture_output=True, text=True, check=True,
                ).stdout
            frozen = _without_seed_tools(frozen, packages)
            (staging / _CONSTRAINTS).write_text(frozen)
            installed = dict(_parse_freeze(frozen))
            fingerprint = _fingerprint(staging)
            manifest = {
                "key": key,
                "name": resolution.name,
                "runtime": resolution.version,
                "tensorflow": resolution.tensorflow,
                "packages": packages,
                "cutoff": resolution.cutoff,
                "fallback": resolution.fallback,
                "dependency_metadata": {k: list(v) for k, v in resolution.dependency_metadata.items()},
                "python": python,
                "python_version": resolution.python,
                "installed": installed,
                "builder": _builder(resolution) or "uv",
                "tools": str(self.tools),
                "built_at": time.time(),
                "build_seconds": round(time.monotonic() - started, 1),
                "fingerprint": fingerprint,
            }
            (staging / _MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
            final = self.root / key
            shutil.rmtree(final, ignore_errors=True)  # an incomplete one (not ours: ours appear whole)
            staging.rename(final)
        except subprocess.CalledProcessError as error:
            raise EnvironmentBuildFailed(f"Listing the packages of the new environment failed: {error}") from error
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        remove_unused(self.root, keep=final)
        seconds = time.monotonic() - started
        _record_build(log_path.parent / BUILDS_RECORD, {"key": key, "runtime": resolution.version,
                                                          "python": resolution.python, "seconds": round(seconds, 1)})
        progress(f"Built runtime {resolution.version}'s environment in {seconds:.1f} s: {final}")
        return Environment(key, final)

    def _python2_steps(self, resolution: RuntimeResolution, python: str, staging: Path, packages: list[str],
                       base_env: dict[str, str], stack: contextlib.ExitStack,
                       progress: Progress) -> tuple[list[list[str]], dict[str, str]]:
        """virtualenv's and pip's commands for a Python 2.7 build, and pip's environment: the index of
        the runtime's day, served while the build runs."""
        try:
            tool = virtualenv_build.virtualenv_tool(self.tools, base_env)
        except virtualenv_build.ToolUnavailable as error:
            raise EnvironmentBuildFailed(f"Building the environment of runtime {resolution.version} failed: "
                                         f"{error}.") from error
        before = first_instant_after(datetime.date.fromisoformat(resolution.cutoff)) if resolution.cutoff else None
        index = stack.enter_context(DatedIndex(before, base_env, IndexFiles(virtualenv_build.index_cache(self.tools))))
        progress(f"uv drives Python 3 only: Python {resolution.python} is built with {virtualenv_build.VIRTUALENV} "
                 f"and {virtualenv_build.PIP}, from the package index of {resolution.cutoff or 'today'} ({index.url}).")
        return ([virtualenv_build.create_argv(tool, python, staging), virtualenv_build.install_argv(staging, packages)],
                pip_environment(base_env, index.url))


def _uv_steps(resolution: RuntimeResolution, python: str, staging: Path, packages: list[str],
              config: Path) -> list[list[str]]:
    """uv's commands for a build: the environment, then the packages as of the runtime's day."""
    uv = uv_binary()
    return [
        [uv, "venv", "--quiet", "--clear", "--seed", "--relocatable", "--python", python, str(staging)],
        [uv, "pip", "install", "--python", environment_python(staging), "--config-file", str(config),
         *as_of_arguments(resolution.cutoff), *packages],
    ]


def _builder(resolution: RuntimeResolution) -> str:
    """What builds the environment, where it is not uv (part of its key)."""
    if virtualenv_build.is_python2(resolution.python):
        return f"{virtualenv_build.VIRTUALENV}, {virtualenv_build.PIP}"
    return ""


def _killed(returncode: int, tool: str = "uv") -> str | None:
    """What to say of a step that a signal ended (its last output line says nothing about that)."""
    if returncode >= 0:
        return None
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"{tool} was killed by {name} before it finished (another process, the OOM killer or a shutdown stopped it)."


def _record_build(record: Path, entry: dict[str, Any]) -> None:
    """One line for a completed build (appended whole: builds on one node hold the lock in turn)."""
    entry = {**entry, "host": socket.gethostname(), "pid": os.getpid(), "finished": time.time()}
    try:
        with record.open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry, sort_keys=True) + "\n")
    except OSError:
        pass  # a record is for people and tests; the environment is built either way


def _interpreter_of(resolution: RuntimeResolution) -> str:
    if resolution.interpreter is None:
        raise EnvironmentBuildFailed(resolution.problem or f"No Python {resolution.python} to build runtime "
                                     f"{resolution.version}'s environment on.")
    return resolution.interpreter.path


class _HeldLock:
    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def __enter__(self) -> None:
        return None

    def __exit__(self, *_exc: object) -> None:
        fcntl.flock(self._handle, fcntl.LOCK_UN)
        self._handle.close()


@dataclass(frozen=True)
class _Stalled:
    """A uv step that showed no progress for the stall limit (`stall`), and was killed."""

    reason: str


def _say_in_log(line: str, log: Any, progress: Progress) -> None:
    log.write(f"# {line}\n")
    log.flush()
    progress(line)


def _run(
    argv: list[str], *, env: dict[str, str], log: Any, progress: Progress, stop: threading.Event | None,
    limit: float,
) -> tuple[int, list[str]] | _Stalled | None:
    """Run one uv step, its output into `log` and (except per-package lines) into `progress`;
    (exit code, output lines), or None when `stop` was set (the step is killed), or `_Stalled`
    when it showed no progress for `limit` seconds (killed). The step dies with the thread that runs
    it: a builder that is killed (a Ray actor whose job was stopped) leaves no uv behind."""
    log.write("$ " + " ".join(argv) + "\n")
    log.flush()
    process = subprocess.Popen(
        [*dying_with_this_thread(), *argv], env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, errors="replace", start_new_session=True,
    )
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.rstrip("\n")
            lines.append(line)
            log.write(line + "\n")
            log.flush()
            if line.strip() and not line.lstrip().startswith(("+ ", "- ", "~ ")):
                progress(line.strip())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    watch = StallWatch(process.pid, limit)
    while process.poll() is None:
        if stop is not None and stop.wait(0.1):
            _kill_group(process)
            reader.join(5)
            return None
        if stop is None:
            time.sleep(0.1)
        if watch.check():
            _kill_group(process)
            reader.join(5)
            return _Stalled(watch.explain("uv"))
    reader.join(5)
    return process.returncode, lines


def _kill_group(process: subprocess.Popen[str]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass
    process.wait()


# What `uv venv --seed` puts in every environment so that its own pip can install what uv
# refuses; not part of the runtime's package set (a trainer may pin its own setuptools).
_SEED_TOOLS = ("pip", "setuptools", "wheel")


def _without_seed_tools(frozen: str, packages: list[str]) -> str:
    """`uv pip freeze` output without the seeded tools, unless the package set asks for them."""
    asked = {normalise_name(re.split(r"[<>=!~\[ ;]", p, maxsplit=1)[0]) for p in packages}
    dropped = set(_SEED_TOOLS) - asked
    lines = [line for line in frozen.splitlines()
             if normalise_name(line.partition("==")[0]) not in dropped]
    return "".join(f"{line}\n" for line in lines)


def _parse_freeze(text: str) -> list[tuple[str, str]]:
    pairs = []
    for line in text.splitlines():
        name, sep, version = line.partition("==")
        if sep:
            pairs.append((normalise_name(name), version.strip()))
    return pairs


def _fingerprint(root: Path) -> dict[str, int]:
    """How many files the environment holds and their total size, bytecode caches aside (the
    interpreter writes those as it runs): recorded at build, compared before each use."""
    files = size = 0
    for directory, dirs, names in os.walk(root):
        dirs[:] = [name for name in dirs if name != "__pycache__"]
        for name in names:
            if name == _MANIFEST or name.endswith(".pyc"):
                continue
            try:
                size += os.lstat(os.path.join(directory, name)).st_size
            except OSError:
                continue
            files += 1
    return {"files": files, "bytes": size}


def damage_of(environment: Environment) -> str | None:
    """What is wrong with a built environment (files deleted or changed since its build), or None.
    Environments built before fingerprints were recorded are taken as they are."""
    try:
        recorded = environment.manifest().get("fingerprint")
    except (OSError, ValueError):
        return "its manifest cannot be read"
    if not isinstance(recorded, dict):
        return None
    now = _fingerprint(environment.root)
    if now == recorded:
        return None
    missing = int(recorded.get("files", 0)) - now["files"]
    if missing > 0:
        return f"{missing} of its {recorded.get('files')} files are missing"
    return (f"its files changed since it was built ({now['files']} files, {now['bytes']} bytes; "
            f"built with {recorded.get('files')} files, {recorded.get('bytes')} bytes)")


def _is_complete(environment: Environment) -> bool:
    try:
        manifest = environment.manifest()
    except (OSError, ValueError):
        return False
    return manifest.get("key") == environment.key and os.path.exists(environment.python)


def _disk_usage(root: Path) -> tuple[int, int]:
    total = own = 0
    for directory, _dirs, files in os.walk(root):
        for name in files:
            try:
                stat = os.lstat(os.path.join(directory, name))
            except OSError:
                continue
            total += stat.st_size
            if stat.st_nlink == 1:
                own += stat.st_size
    return total, own
