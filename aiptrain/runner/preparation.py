"""PREPARING: installing a job's staged trainer package(s) into its own site directory.

`pip install --no-deps --no-index --no-build-isolation --target SITE PACKAGE...`: nothing is
downloaded, the job's code never touches the environment aiptrain runs in, and two jobs with
different versions of one package do not see each other's. Dependencies come from the
interpreter's environment, as they came from the runtime version's image on the service.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from aiptrain.errors import UsageError
from aiptrain.runner.gs_paths import GS_PREFIX
from aiptrain.runner.log_capture import SERVICE_TASK, LogSink, OutputTail, pump_stream
from aiptrain.runner.processes import TOKEN_VARIABLE, describe_returncode, start_process, stop_processes
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
) -> str | None:
    """Install the packages into `site_dir`; None on success, else the job's errorMessage.

    Raises nothing for a user mistake (a missing package is the job's failure, not ours), but
    returns a message saying what is missing and where it was looked for. A cancelled install
    returns None too; the caller sees `stop` set.
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
    sink.emit(SERVICE_TASK, "INFO", "Installing package(s): " + ", ".join(package_uris))
    env = dict(base_env)
    env[TOKEN_VARIABLE] = run_token
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    argv = [
        python, "-m", "pip", "install", "--no-deps", "--no-index", "--no-build-isolation",
        "--no-input", "--quiet", "--target", str(site_dir), *(str(path) for path in paths),
    ]
    result = run_logged_command(
        argv, env=env, cwd=site_dir.parent, sink=sink, stop=stop, kill_grace=kill_grace
    )
    if result.returncode is None or result.returncode == 0:
        return None
    message = f"Installing the package(s) with pip failed: pip {describe_returncode(result.returncode)}."
    if result.tail:
        message += " Its last error lines:\n" + "\n".join(result.tail)
    return message
