"""PREPARING: installing a job's staged trainer package(s) into its own site directory.

On a runtime environment (the default), the packages are installed as the service did, one after
another, each with its `install_requires`, on top of the runtime's packages and as of the job's day
(`trainer_install`). With AIPTRAIN_LOCAL_PYTHON, `pip install --no-deps --no-index
--no-build-isolation --target DIR PACKAGE`: nothing is downloaded and dependencies come from that
interpreter's environment. Either way the job's code never touches a shared environment, and two
jobs with different versions of one package do not see each other's.

The result goes into the install cache (`install_cache`), once per (the packages' bytes in their
order, the environment, the day) on a runtime environment, once per (package bytes, interpreter)
with AIPTRAIN_LOCAL_PYTHON, and every job's site directory is made of hard links to there, so only
the first job with given packages pays for the install, and all of them share its disk.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from aiptrain._environments import install_cache, overlay, pip_fallback, trainer_install, trainer_pins
from aiptrain._environments.dated_index import DatedIndex
from aiptrain._environments.for_job import interpreter_problem
from aiptrain._environments.release_dates import DatesUnavailable, ReleaseDates, dates_dir
from aiptrain._environments.stall import StallWatch, once_more_if_stalled, stall_limit
from aiptrain._environments.store import Environment
from aiptrain._environments.uv import uv_environment
from aiptrain._environments.virtualenv_build import PIP
from aiptrain._job.era import LABEL, SETTING, ResolveDay
from aiptrain._replicas.gs_paths import GS_PREFIX
from aiptrain._replicas.log_capture import SERVICE_TASK, LogSink, OutputTail, pump_stream
from aiptrain._replicas.processes import TOKEN_VARIABLE, describe_returncode, start_process, stop_processes
from aiptrain._storage.local import local_path_for
from aiptrain.errors import UsageError


@dataclass(frozen=True)
class CommandResult:
    returncode: int | None  # None: stopped because the job was cancelled
    tail: list[str]
    stalled: str | None = None  # why it was stopped as stalled (`stall`), its return code then 1


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
    installer: bool = False,
    stall_seconds: float = 0.0,
) -> CommandResult:
    """Run a helper command, logging each output line under `task_name`; stop it on `stop`, or
    when it shows no progress for `stall_seconds` (`stall`; 0: never).
    `installer`: uv or pip, which report their progress on stderr (logged as INFO, but their
    errors and warnings)."""
    tail = OutputTail()
    process = start_process(argv, env=env, cwd=cwd)
    logged = _InstallerSink(sink) if installer else sink
    pumps = [
        threading.Thread(
            target=pump_stream,
            args=(stream,),
            kwargs={"task_name": task_name, "from_stderr": from_stderr, "sink": logged, "tail": tail},
            daemon=True,
        )
        for stream, from_stderr in ((process.popen.stdout, False), (process.popen.stderr, True))
    ]
    for pump in pumps:
        pump.start()
    watch = StallWatch(process.pid, stall_seconds)
    try:
        while not process.has_exited():
            if stop.wait(0.05):
                stop_processes([process], kill_grace)
                return CommandResult(None, tail.lines())
            if watch.check():
                stop_processes([process], kill_grace)
                return CommandResult(1, tail.lines(), stalled=watch.explain(Path(argv[0]).name))
        returncode = process.reap()
    finally:
        if process.popen.returncode is None:
            stop_processes([process], kill_grace)
        for pump in pumps:
            pump.join(2.0)
    return CommandResult(returncode, tail.lines())


@dataclass(frozen=True)
class _InstallerSink:
    """An installer's stderr lines at the severity they say (`error:` / `warning:`), else INFO."""

    sink: LogSink

    def emit(self, task_name: str, severity: str, message: str, *, trial_id: str | None = None,
             captured: datetime.datetime | None = None, from_stderr: bool = False) -> None:
        if from_stderr and severity == "ERROR":
            said = message.lstrip().lower()
            severity = ("ERROR" if said.startswith(("error", "\u00d7")) else
                        "WARNING" if said.startswith(("warning", "deprecation")) else "INFO")
        self.sink.emit(task_name, severity, message, trial_id=trial_id, captured=captured, from_stderr=from_stderr)


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
    day: ResolveDay | None = None,
    on_day: Callable[[ResolveDay], None] | None = None,
) -> str | None:
    """Install the packages into `site_dir`; None on success, else the job's errorMessage.

    With `environment`, the packages come with their dependencies, on top of its packages, as of
    `day` (default: the environment's own day) or the later day their pins date the job to
    (`trainer_pins`), which `on_day` is told; `python` is the environment's. Without, each is
    installed alone with `python`'s pip.

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
    env = dict(base_env)
    env[TOKEN_VARIABLE] = run_token
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    job = _Install(cache=cache, env=env, sink=sink, stop=stop, kill_grace=kill_grace)
    if environment is not None:
        day = _dated_by_pins(day or environment_day(environment), paths, environment, cache, env, sink)
        if on_day is not None:
            on_day(day)
        outcome = job.on_runtime(package_uris, paths, environment, day)
    else:
        outcome = job.alone(package_uris, paths, python)
    if not isinstance(outcome, list):
        return outcome  # the job's error message, or None when cancelled
    try:
        install_cache.link_into_site(outcome, site_dir)
    except OSError as error:
        return f"Linking the installed package(s) into {site_dir} failed: {error}"
    return None


def environment_day(environment: Environment) -> ResolveDay:
    """The day of an environment's runtime (today's index for the fallback), when the job names none."""
    cutoff = str(environment.manifest().get("cutoff") or "")
    if environment.stands_in or not cutoff:
        return ResolveDay(None, "the environment has no day of its own")
    return ResolveDay(datetime.date.fromisoformat(cutoff), f"runtime {environment.manifest().get('runtime')}'s day",
                      pins_may_move=True)


def _dated_by_pins(day: ResolveDay, paths: list[Path], environment: Environment, cache: Path,
                   env: dict[str, str], sink: LogSink) -> ResolveDay:
    """The job's day as the trainer's pins date it; the day as it was, with a warning, when their
    release dates are neither remembered nor to be had from the index."""
    python = str(environment.manifest().get("python_version") or "")
    try:
        return trainer_pins.day_with_pins(day, paths, python, ReleaseDates(dates_dir(cache), env))
    except DatesUnavailable as error:
        sink.emit(SERVICE_TASK, "WARNING", f"The days the trainer's pins were published cannot be learnt: {error}. "
                                           f"Its packages resolve as of {day.label}.")
        return day


@dataclass
class _Install:
    """One job's install into the cache: where, with what environment variables, logged where."""

    cache: Path
    env: dict[str, str]
    sink: LogSink
    stop: threading.Event
    kill_grace: float

    def say(self, message: str) -> None:
        self.sink.emit(SERVICE_TASK, "INFO", message)

    def run(self, argv: list[str], env: dict[str, str], cwd: Path) -> CommandResult:
        """The installer, and once more if it stalled (a stuck connection or lock rarely sticks twice)."""
        limit = stall_limit(self.env)
        result = once_more_if_stalled(
            lambda: run_logged_command(argv, env=env, cwd=cwd, sink=self.sink, stop=self.stop,
                                       kill_grace=self.kill_grace, installer=True, stall_seconds=limit),
            lambda attempt: attempt.stalled, lambda line: self.sink.emit(SERVICE_TASK, "WARNING", line))
        if result.stalled is not None:
            return dataclasses.replace(result, stalled=f"{result.stalled} (it stalled twice)")
        return result

    def on_runtime(self, uris: list[str], paths: list[Path], environment: Environment,
                   day: ResolveDay) -> list[install_cache.CachedInstall] | str | None:
        """All the packages, in order, as one cache entry of (packages, environment, day)."""
        try:
            key = install_cache.packages_key(paths, environment.key, day.label)
        except OSError as error:
            return f"Reading the package(s) to install failed: {error}"
        self.say(day.line())
        entry = install_cache.lookup(self.cache, key)
        if entry is not None:
            self.say(f"Reusing installed package(s) {', '.join(uris)} (cached, resolved as of {day.label})")
            return [entry]
        self.say("Installing package(s): " + ", ".join(uris))
        outcome = self._staged(key, lambda staging: self._on_runtime(paths, environment, day, staging),
                               {"packages": ", ".join(p.name for p in paths), "environment": environment.key,
                                "day": day.label})
        return [outcome] if isinstance(outcome, install_cache.CachedInstall) else outcome

    def alone(self, uris: list[str], paths: list[Path], python: str) -> list[install_cache.CachedInstall] | str | None:
        """Each package without its dependencies, with `python`'s pip, one cache entry each."""
        try:
            keys = [install_cache.cache_key(path, python) for path in paths]
        except OSError as error:
            return f"Reading the package(s) to install failed: {error}"
        entries = [install_cache.lookup(self.cache, key) for key in keys]
        for uri, entry in zip(uris, entries, strict=True):
            if entry is not None:
                self.say(f"Reusing installed package {uri} (cached)")
        missing = [index for index, entry in enumerate(entries) if entry is None]
        if missing:
            self.say("Installing package(s): " + ", ".join(uris[i] for i in missing))
        for index in missing:
            outcome = self._staged(keys[index], functools.partial(self._alone, paths[index], python),
                                   {"package": paths[index].name,
                                    "python": install_cache.interpreter_identity(python)})
            if not isinstance(outcome, install_cache.CachedInstall):
                return outcome
            entries[index] = outcome
        return [entry for entry in entries if entry is not None]

    def _staged(self, key: str, install: Callable[[Path], str | Literal[True] | None],
                description: dict[str, str]) -> install_cache.CachedInstall | str | None:
        """Run `install` into a new staging directory and publish it as the entry `key`: the entry,
        else the job's error message, or None when the job was cancelled meanwhile."""
        try:
            staging = install_cache.new_staging(self.cache, key)
        except OSError as error:
            return f"Cannot write the install cache {self.cache}: {error}"
        try:
            outcome = install(staging)
            if outcome is not True:
                return outcome
            return install_cache.publish(staging, self.cache, key, description)
        except OSError as error:
            return f"Cannot write the install cache {self.cache}: {error}"
        finally:
            install_cache.discard(staging)  # gone already when it was published

    def _alone(self, package: Path, python: str, staging: Path) -> str | Literal[True] | None:
        problem = interpreter_problem(python)
        if problem:
            return problem
        with _readable_as_a_file(package) as readable:
            argv = [
                python, "-m", "pip", "install", "--no-deps", "--no-index", "--no-build-isolation",
                "--no-input", "--quiet", "--target", str(install_cache.staging_site(staging)), str(readable),
            ]
            result = self.run(argv, self.env, staging)
        if result.returncode is None:
            return None
        if result.returncode != 0:
            message = f"Installing the package(s) with pip failed: pip {describe_returncode(result.returncode)}."
            if result.tail:
                message += " Its last error lines:\n" + "\n".join(result.tail)
            return message
        return True

    def _on_runtime(self, paths: list[Path], environment: Environment, day: ResolveDay,
                    staging: Path) -> str | Literal[True] | None:
        """Every package into the staging site, in order, on top of the runtime's packages shown
        there (`overlay`); True, the job's error message, or None when cancelled."""
        site = install_cache.staging_site(staging)
        # pip sees a Python 2.7 runtime's packages where they are; uv, installing into a target, is shown them.
        shown = {} if environment.python2 else overlay.write(site, environment.root, environment.dependency_metadata())
        with contextlib.ExitStack() as stack:
            fallback = _PipFallback(self, environment, day, stack)
            for package in paths:
                readable = stack.enter_context(_readable_as_a_file(package))
                outcome = self._one_on_runtime(readable, package, environment, day, site, staging, fallback)
                if outcome is not True:
                    return outcome
            if fallback.index is not None and fallback.index.unfiltered:
                self.say("The package index gave no upload times for " + ", ".join(sorted(fallback.index.unfiltered))
                         + f": their files were not held to {day.label}.")
        replaced = overlay.remove(site, shown)
        if replaced:
            self.say("The trainer's requirements replace the runtime's " + ", ".join(
                f"{r.name} {r.runtime_version} (now {r.version})" for r in replaced)
                + ", as pip replaced them in the image; the runtime's copies stay underneath.")
        with contextlib.suppress(OSError):
            (site / ".lock").unlink()  # uv's lock of the target directory
        overlay.remove_empty_directories(site)
        return True

    def _one_on_runtime(self, readable: Path, package: Path, environment: Environment, day: ResolveDay,
                        site: Path, staging: Path, fallback: _PipFallback) -> str | Literal[True] | None:
        if environment.python2:
            return fallback.install(readable, package, site, staging, "uv drives Python 3 only")
        overrides = trainer_install.overrides_file(staging) if environment.stands_in else None
        argv = trainer_install.install_argv(readable, environment, site, day, overrides=overrides)
        result = self.run(argv, uv_environment(self.env), staging)
        if result.returncode is None:
            return None
        if result.returncode == 0:
            return True
        if result.stalled is not None:
            return f"Installing the trainer package {package.name} failed: {result.stalled}."
        lines = result.tail
        mismatch = trainer_install.python_mismatch(lines, environment)
        if mismatch is not None:
            return f"Installing the trainer package {package.name} failed: {mismatch}."
        too_new = trainer_install.published_after_the_day(package, lines, day)
        if too_new is not None:
            return too_new
        why = trainer_install.failure_reason_line(lines)
        if not trainer_install.uv_refused(lines):
            pin = trainer_install.missing_pin(lines)
            if pin is None:
                return trainer_install.failure_message(package, environment, lines)
            if not fallback.dated_index().has_version(pin.name, pin.version):
                when = f" published by {day.label}" if day.day is not None else ""
                return (f"Installing the trainer package {package.name} failed: its requirement {pin.name}=="
                        f"{pin.version} has no file on the package index{when}. Hint: check the version, or run "
                        f"the job as of a later day (--labels {LABEL}=YYYY-MM-DD, or {SETTING}).")
            # The index has it, uv found none: it skips files whose metadata it cannot read.
            why = f"uv reads no file of {pin.name}=={pin.version}, which the index has: uv refuses its metadata"
        return fallback.install(readable, package, site, staging, why)


class _PipFallback:
    """The runtime's pip, for the packages uv refuses: said once in the log, with the index of the day."""

    def __init__(self, job: _Install, environment: Environment, day: ResolveDay, stack: contextlib.ExitStack) -> None:
        self.job, self.environment, self.day, self.stack = job, environment, day, stack
        self.index: DatedIndex | None = None
        self.said = False

    def dated_index(self) -> DatedIndex:
        if self.index is None:
            self.index = self.stack.enter_context(DatedIndex(self.day.exclude_newer, self.job.env))
        return self.index

    def install(self, readable: Path, package: Path, site: Path, staging: Path, why: str) -> str | Literal[True] | None:
        index = self.dated_index()
        if not self.said and self.environment.python2:
            as_of = f" of {self.day.label}" if self.day.day is not None else ""
            self.job.say(f"Installing {package.name} with the runtime's own {PIP} on Python 2.7 ({why}), as the "
                         f"service did, from the package index{as_of} ({index.url}).")
            self.said = True
        elif not self.said:
            as_of = f" of {self.day.label}" if self.day.day is not None else ""
            self.job.say(f"uv cannot install {package.name}'s requirements ({why}); installing it with the runtime's "
                         f"own pip, as the service did, from the package index{as_of} ({index.url}).")
            self.said = True
        elif self.environment.python2:
            self.job.say(f"Installing {package.name} with the runtime's own pip as well.")
        else:
            self.job.say(f"uv cannot install {package.name}'s requirements either; the runtime's pip installs it.")
        tail: list[str] = []

        def run(argv: list[str], env: dict[str, str]) -> int | None:
            result = self.job.run(argv, env, staging)
            tail[:] = result.tail
            return result.returncode

        code = pip_fallback.install(readable, self.environment, site, staging, index_url=index.url,
                                    env=self.job.env, run=run)
        if code is None:
            return None
        if code != 0:
            mismatch = trainer_install.python_mismatch(tail, self.environment)
            if mismatch is not None:
                return f"Installing the trainer package {package.name} failed: {mismatch}."
            message = f"Installing the trainer package {package.name} with pip failed: pip {describe_returncode(code)}."
            return message + (" Its last error lines:\n" + "\n".join(tail) if tail else "")
        return True


# Characters a requirement parser reads as syntax even in a file's path (see `_readable_as_a_file`).
_REQUIREMENT_SYNTAX = frozenset(";#")


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
