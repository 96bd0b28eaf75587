"""Finding the Python interpreters runtime environments are built on, as a user's machine has them.

A runtime's TensorFlow has wheels for a few CPython versions only (1.15: 3.6 and 3.7), so its
environment needs that Python, not the one aiptrain runs on. An interpreter of version X.Y is
looked for, in this order, and the first that runs and says it is X.Y wins:

1. `AIPTRAIN_PYTHONS`: interpreters named explicitly, separated by `:` or `,`, each a path or
   `X.Y=path` (the version is asked of the interpreter either way);
2. the Pythons uv installed (`uv python dir`: `cpython-X.Y.*/bin/pythonX.Y`);
3. `pythonX.Y` on PATH;
4. pyenv's versions: `$PYENV_ROOT/versions/X.Y.*/bin/pythonX.Y` (PYENV_ROOT defaults to ~/.pyenv).

When none is found and downloads are allowed (`AIPTRAIN_PYTHON_DOWNLOADS`, `automatic` by
default, `never` to forbid), uv downloads one into its own directory; offline, that attempt
fails within a second (no retries, a short timeout), never hangs. uv has no Python 2 to download.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from aiptrain._environments.uv import uv_binary, uv_environment

PYTHONS_SETTING = "AIPTRAIN_PYTHONS"
DOWNLOADS_SETTING = "AIPTRAIN_PYTHON_DOWNLOADS"
_VERSION = re.compile(r"^\d+\.\d+$")
_PROBE = "import sys; print('%d.%d' % sys.version_info[:2]); print(sys.executable)"
_DOWNLOAD_TIMEOUT_SECONDS = 600
PYTHON2_RELEASE = "2.7.18"  # the last CPython 2


@dataclass(frozen=True)
class Interpreter:
    version: str  # major.minor
    path: str  # the interpreter's own binary (symlinks and pyenv shims resolved)
    source: str  # where it was found: "AIPTRAIN_PYTHONS", "uv", "PATH", "pyenv", "download"


def downloads_allowed(env: Mapping[str, str] | None = None) -> bool:
    source = os.environ if env is None else env
    return source.get(DOWNLOADS_SETTING, "automatic").strip().lower() not in ("never", "0", "false", "no")


def where_looked(version: str, env: Mapping[str, str] | None = None) -> str:
    """The places `find` looks for Python `version`, for a message that says what to do."""
    source = os.environ if env is None else env
    return (f"{PYTHONS_SETTING}, uv's Pythons ({_uv_python_dir() or 'uv python dir'}), python{version} on PATH, "
            f"{_pyenv_root(source)}/versions")


def how_to_get(version: str) -> str:
    if version.startswith("2."):  # uv neither downloads nor drives Python 2
        return (f"install CPython {PYTHON2_RELEASE} (`pyenv install {PYTHON2_RELEASE}`, or your system's python2.7), "
                f"or name it: {PYTHONS_SETTING}=/path/to/python{version}")
    return (f"install one (`uv python install {version}` or `pyenv install {version}`), or name it: "
            f"{PYTHONS_SETTING}=/path/to/python{version}")


def find(version: str, env: Mapping[str, str] | None = None) -> Interpreter | None:
    """The first working interpreter of `version` (major.minor) on this machine, or None."""
    source = os.environ if env is None else env
    for path, where in _candidates(version, source):
        found = _probe(path)
        if found is not None and found[0] == version:
            return Interpreter(version, found[1], where)
    return None


def download(version: str, env: Mapping[str, str] | None = None) -> tuple[Interpreter | None, str]:
    """uv's download of Python `version`: (the interpreter, "") or (None, why it failed)."""
    source = dict(os.environ if env is None else env)
    if not downloads_allowed(source):
        return None, f"downloads are turned off ({DOWNLOADS_SETTING}=never)"
    uv_env = uv_environment(source)
    # Offline, uv's default retries take about ten seconds to give up: fail at once instead.
    uv_env.update({"UV_PYTHON_DOWNLOADS": "automatic", "UV_HTTP_RETRIES": "0", "UV_HTTP_TIMEOUT": "10"})
    try:
        done = subprocess.run([uv_binary(), "python", "install", version], env=uv_env, capture_output=True,
                              text=True, timeout=_DOWNLOAD_TIMEOUT_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        return None, f"`uv python install {version}` did not finish within {_DOWNLOAD_TIMEOUT_SECONDS} s"
    except OSError as error:
        return None, f"uv could not be run: {error}"
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        return None, f"`uv python install {version}` failed: {lines[-1] if lines else 'no reason given'}"
    _uv_python_dir.cache_clear()
    for path, _where in _uv_candidates(version):
        found = _probe(path)
        if found is not None and found[0] == version:
            return Interpreter(version, found[1], "download"), ""
    return None, f"`uv python install {version}` reported success, but no python{version} appeared"


def _candidates(version: str, env: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    for entry in re.split(r"[:,]", env.get(PYTHONS_SETTING, "")):
        named, _, path = entry.strip().rpartition("=")
        path = path.strip()
        if path and (not named or named.strip() == version):
            yield os.path.expanduser(path), PYTHONS_SETTING
    yield from _uv_candidates(version)
    on_path = shutil.which(f"python{version}", path=env.get("PATH", os.defpath))
    if on_path:
        yield on_path, "PATH"
    versions = Path(_pyenv_root(env)) / "versions"
    for directory in sorted(versions.glob(f"{version}.*"), reverse=True):
        yield str(directory / "bin" / f"python{version}"), "pyenv"


def _uv_candidates(version: str) -> Iterator[tuple[str, str]]:
    root = _uv_python_dir()
    if root:
        for directory in sorted(Path(root).glob(f"cpython-{version}.*"), reverse=True):
            yield str(directory / "bin" / f"python{version}"), "uv"


def _pyenv_root(env: Mapping[str, str]) -> str:
    return env.get("PYENV_ROOT") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".pyenv")


@functools.cache
def _uv_python_dir() -> str | None:
    try:
        done = subprocess.run([uv_binary(), "python", "dir"], env=uv_environment(dict(os.environ)),
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


@functools.cache
def _probe(path: str) -> tuple[str, str] | None:
    """(major.minor, the interpreter's own path) of a working interpreter at `path`, else None.

    Running it is the only reliable answer: a pyenv shim or a broken symlink looks like any
    other file. A venv's interpreter is followed to its base, so environments never nest.
    """
    if not os.access(path, os.X_OK) or os.path.isdir(path):
        return None
    try:
        done = subprocess.run([path, "-c", _PROBE], capture_output=True, text=True, timeout=30, check=False,
                              env={"PATH": os.environ.get("PATH", os.defpath), "HOME": os.environ.get("HOME", "/")})
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.split()
    if done.returncode != 0 or len(lines) != 2 or not _VERSION.match(lines[0]):
        return None
    return lines[0], os.path.realpath(lines[1])
