"""Google's clients, unchanged, in venvs of their own, against a real `local serve` whose only
reach into them is the environment `aiptrain local env --format json` prints (tests/fixtures/client_venvs.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs.manual import DOCS, code_block
from tests.fixtures.emulator import Emulator, running_emulator, trainer_sdist

__all__ = ["ProxiedEmulator", "proxied_emulator", "trainer_sdist"]

CLIENT_PAGES = DOCS / "clients"
EVAL_LINE = 'eval "$(aiptrain local env)"'

PROJECT = "ci-project"
BUCKET = "ci-bucket"
PACKAGE_URI = f"gs://{BUCKET}/packages/trainer-0.1.0.tar.gz"


@dataclass(frozen=True)
class ProxiedEmulator:
    server: Emulator
    env: dict[str, str]  # what `aiptrain local env --format json` printed: all a client is given


def local_env(server: Emulator) -> dict[str, str]:
    """`aiptrain local env --port PORT --format json`, run as a user runs it."""
    done = subprocess.run([sys.executable, "-m", "aiptrain", "local", "env", "--port", str(server.port),
                           "--format", "json"], capture_output=True, text=True, timeout=60, check=False,
                          env={**_without_google_settings(), "AIPTRAIN_HOME": str(server.home)})
    if done.returncode == 2 and "No such command" in done.stderr:
        pytest.skip("`aiptrain local env` is not part of this build")
    assert done.returncode == 0, done.stderr
    variables: dict[str, str] = json.loads(done.stdout)
    return variables


def _without_google_settings() -> dict[str, str]:
    import os

    return {name: value for name, value in os.environ.items()
            if not name.startswith(("GOOGLE_", "CLOUDSDK_")) and name.lower() not in ("https_proxy", "grpc_proxy")}


@pytest.fixture(scope="module")
def proxied_emulator(tmp_path_factory: pytest.TempPathFactory, trainer_sdist: Path) -> Iterator[ProxiedEmulator]:
    """One `local serve` (gRPC and its proxy on) per module, the test trainer in its store."""
    with running_emulator(tmp_path_factory.mktemp("clients-home"), grpc=True) as server:
        server.stage(trainer_sdist, PACKAGE_URI)
        yield ProxiedEmulator(server, local_env(server))


def page_code(page: str, after: str, language: str) -> str:
    """The first LANGUAGE block of docs/clients/PAGE after the text `after`."""
    return code_block(CLIENT_PAGES / page, after, language)


def without_the_eval(shell: str) -> str:
    """A page's shell block less its `eval "$(aiptrain local env)"` line, whose variables the test
    gives the client itself (the same `local env` output, for the server the test started)."""
    lines = shell.splitlines()
    assert any(line.startswith(EVAL_LINE) for line in lines), f"the page no longer says {EVAL_LINE}"
    return "\n".join(line for line in lines if not line.startswith(EVAL_LINE)) + "\n"
