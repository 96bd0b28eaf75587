"""Google's clients run unchanged against `local serve`: each in a process of its own whose whole
environment is what `aiptrain local env --format json` prints (plus PATH and HOME)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

from tests.fixtures.emulator import REPO, Emulator


def client_environment(emulator: Emulator, *, port: int | None = None) -> dict[str, str]:
    """What `aiptrain local env --format json` prints for the emulator, as a user's shell would get it."""
    argv = [sys.executable, "-m", "aiptrain", "local", "env", "--format", "json"]
    if port is not None:
        argv += ["--port", str(port)]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "AIPTRAIN_HOME": str(emulator.home)})
    assert done.returncode == 0, done.stderr
    variables: dict[str, str] = json.loads(done.stdout)
    return variables


def bare_environment(emulator: Emulator, **extra: str) -> dict[str, str]:
    """Only `local env`'s variables, PATH and HOME: nothing inherited points a client anywhere."""
    return {**client_environment(emulator), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/"), **extra}


def run_python(emulator: Emulator, source: str, *args: str, timeout: float = 300) -> Any:
    """Run `source` (which prints one JSON document last) in a bare environment; its answer."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(source), *args], capture_output=True, text=True,
                          timeout=timeout, env=bare_environment(emulator), cwd="/")
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
