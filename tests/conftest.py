"""Isolation for every test: a private AIPTRAIN_HOME, no colour, and no real Google endpoint."""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Which tests share an xdist worker (markers for the expensive session fixtures): see that module.
pytest_plugins = ["tests.fixtures.worker_groups", "tests.fixtures.containers", "tests.fixtures.ray_cluster"]

GOOGLE_SUFFIXES = ("googleapis.com", "google.com", "gcr.io", "pkg.dev")


class RealGoogleEndpointReached(AssertionError):
    """A test tried to reach a real Google service; point it at an emulator instead."""


# A shell starts background commands (`make test &`, nohup) with SIGINT ignored, and children inherit
# that: the trainers and commands the Ctrl-C tests interrupt would never see the signal. A handler
# (unlike SIG_IGN) is reset to the default at exec, so every process the suite starts can be
# interrupted again, as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def no_container_engine_of_this_machine() -> Iterator[None]:
    """No test reaches this machine's own container engine (Docker's default socket, Podman): the
    `containers` tests point at the suite's daemon (tests/fixtures/containers.py), every other test
    and the servers and supervisors they start (module fixtures included) find none."""
    saved = {name: os.environ.get(name) for name in ("AIPTRAIN_CONTAINER_ENGINE", "DOCKER_HOST")}
    os.environ["AIPTRAIN_CONTAINER_ENGINE"] = "docker"
    os.environ["DOCKER_HOST"] = "unix:///nonexistent/aiptrain-tests/docker.sock"
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("aiptrain-home")
    monkeypatch.setenv("AIPTRAIN_HOME", str(home))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("AIPTRAIN_DEBUG", "1")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    # Trainers run with the test interpreter (it has TensorFlow) unless a test asks for the
    # runtime environments (tests/environments), which build them once per session.
    monkeypatch.setenv("AIPTRAIN_LOCAL_PYTHON", sys.executable)
    monkeypatch.delenv("AIPTRAIN_ENVS_DIR", raising=False)
    monkeypatch.delenv("AIPTRAIN_CONTAINER_PULL", raising=False)
    # gcloud's configuration fills in project, region and endpoints: none of this machine's.
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path_factory.mktemp("cloudsdk")))
    for name in ("AIPTRAIN_BACKEND", "AIPTRAIN_PROJECT", "AIPTRAIN_REGION", "AIPTRAIN_API_ENDPOINT",
                 "AIPTRAIN_FORMAT", "AIPTRAIN_STORAGE", "AIPTRAIN_VERBOSITY", "CLOUDSDK_COMPUTE_REGION",
                 "CLOUDSDK_CORE_PROJECT", "CLOUDSDK_ACTIVE_CONFIG_NAME", "CLOUDSDK_AI_PLATFORM_REGION",
                 "CLOUDSDK_API_ENDPOINT_OVERRIDES_ML", "CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM",
                 "GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture(autouse=True)
def no_real_google(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = socket.getaddrinfo

    def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host or "")
        if name.endswith(GOOGLE_SUFFIXES) or name == "metadata.google.internal":
            raise RealGoogleEndpointReached(f"test tried to reach {name}")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", guarded)
    yield
