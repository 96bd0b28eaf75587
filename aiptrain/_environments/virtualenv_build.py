"""Python 2.7 environments: CPython 2.7, virtualenv and the pip of their day, since uv drives Python 3 only.

virtualenv 20.21 is the last release that creates Python 2.7 environments, and it seeds them from
wheels it carries (pip 20.3.4, the last pip for 2.7; setuptools 44.1.1; wheel 0.37.1), so making one
needs no network. It is a declared tool of aiptrain's, not assumed present: installed with uv, at
the version below, into a small environment of its own under the tools directory beside the
environment store (`$AIPTRAIN_HOME/tools/`, a Ray node's cache `tools/`) on first use, whole or not
at all. Its application data (the seed wheels it unpacks) lives there too, never in the user's home.

pip 20.3.4 has no `--exclude-newer`: it is pointed at the index of the day (`dated_index`), which
leaves out every file uploaded after the runtime's day, as uv's option does for Python 3. The
environment is otherwise what the store makes of a uv build: the same key (plus this builder),
manifest, constraints, damage check and stall watch.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from aiptrain._environments.uv import environment_python, uv_binary, uv_environment

VIRTUALENV = "virtualenv==20.21.1"  # the last virtualenv that creates Python 2.7 environments
PIP = "pip 20.3.4"  # what VIRTUALENV seeds a Python 2.7 environment with: the last pip for 2.7
_TOOL = "virtualenv-" + VIRTUALENV.partition("==")[2]
_APP_DATA = "app-data"
_TIMEOUT_SECONDS = 600


class ToolUnavailable(OSError):
    """virtualenv could not be installed; the message says why."""


def is_python2(version: str) -> bool:
    return version.startswith("2.")


def virtualenv_tool(tools: Path, env: Mapping[str, str]) -> Path:
    """The tool environment of VIRTUALENV under `tools`, installed first if needed (once, under a lock)."""
    root = tools / _TOOL
    if _is_complete(root):
        return root
    tools.mkdir(parents=True, exist_ok=True)
    with (tools / f".{_TOOL}.lock").open("a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _is_complete(root):
            return root
        staging = Path(tempfile.mkdtemp(dir=tools, prefix=f".tmp-{_TOOL}-"))
        try:
            uv_env = uv_environment(dict(env))
            for argv in ([uv_binary(), "venv", "--quiet", "--python", sys.executable, str(staging / "venv")],
                         [uv_binary(), "pip", "install", "--quiet", "--python",
                          environment_python(staging / "venv"), VIRTUALENV]):
                done = _run_tool(argv, uv_env)
                if done.returncode != 0:
                    lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
                    raise ToolUnavailable(f"installing {VIRTUALENV} (which builds Python 2.7 environments) under "
                                          f"{tools} failed: {lines[-1].strip() if lines else 'uv gave no reason'}")
            shutil.rmtree(root, ignore_errors=True)  # an incomplete one: ours appear whole
            staging.rename(root)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return root


def index_cache(tools: Path) -> Path:
    """Where the index of the day's pages and files are kept for Python 2.7 builds (`index_files`)."""
    return tools / "python2-index"


def create_argv(tool: Path, python: str, target: Path) -> list[str]:
    """virtualenv's command that makes `target` an environment of `python`, seeded from its own wheels."""
    # `-m`, not its script: the script names the directory it was installed in, before the rename
    return [environment_python(tool / "venv"), "-m", "virtualenv", "--no-download", "--no-periodic-update",
            "--app-data", str(tool / _APP_DATA), "--clear", "--python", python, str(target)]


def install_argv(target: Path, packages: list[str]) -> list[str]:
    # No bytecode at install, as uv's builds: compiling every module of TensorFlow and SciPy doubles the
    # build, and Python 2 writes what it imports itself (the damage check ignores bytecode).
    return [environment_python(target), "-m", "pip", "install", "--progress-bar", "off", "--no-compile", *packages]


def freeze(target: Path, env: Mapping[str, str]) -> str:
    """`pip freeze` of the environment at `target` (pip leaves out its own tools)."""
    return subprocess.run([environment_python(target), "-m", "pip", "freeze"], env=dict(env), capture_output=True,
                          text=True, check=True, timeout=_TIMEOUT_SECONDS).stdout


def make_venv(tool: Path, python: str, target: Path, env: Mapping[str, str]) -> None:
    """A throw-away environment of `python` at `target` (for a trainer's install with pip)."""
    done = _run_tool(create_argv(tool, python, target), tool_environment(env))
    if done.returncode != 0:
        raise OSError(f"virtualenv failed: {(done.stderr or done.stdout).strip()}")


def failure_reason(lines: list[str]) -> str:
    """pip's reason for a failed install: its ERROR lines, else its last lines."""
    errors = [line.strip() for line in lines if line.strip().startswith("ERROR:")]
    chosen = errors or [line.strip() for line in lines if line.strip()][-4:]
    return " ".join(line.removeprefix("ERROR:").strip() for line in chosen) or "pip gave no reason"


def tool_environment(env: Mapping[str, str]) -> dict[str, str]:
    """virtualenv's settings: none of the user's, nothing from a virtual environment around it."""
    clean = {name: value for name, value in env.items() if not name.startswith(("VIRTUALENV_", "PIP_"))}
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        clean.pop(name, None)
    return clean


def _run_tool(argv: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, env=dict(env), capture_output=True, text=True, check=False,
                              timeout=_TIMEOUT_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as error:
        return subprocess.CompletedProcess(argv, 1, "", str(error))


def _is_complete(root: Path) -> bool:
    venv = root / "venv"
    return os.path.exists(environment_python(venv)) and any(venv.glob("lib/python*/site-packages/virtualenv/"))
