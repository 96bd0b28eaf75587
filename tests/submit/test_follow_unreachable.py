"""Following a job when the endpoint does not answer: --timeout is honoured, nothing hangs silently.

Real processes and real sockets: a closed loopback port for "never reachable", and an emulator
killed (and restarted on the same port) in the middle of a follow for "went away".
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from aiptrain._backends.base import BackendSettings
from aiptrain._backends.mlv1.backend import MlV1Backend
from aiptrain._backends.polling import AdaptivePoller
from aiptrain._job.logs import LogEntry
from aiptrain._job.spec import JobState, parse_job
from aiptrain._submit.follow import follow_job
from tests.fixtures.emulator import REPO, running_emulator, wait_until

PROJECT = "ci-project"
PACKAGE = "gs://unreachable-bucket/trainer.tar.gz"


def closed_port_url() -> str:
    """A loopback URL nothing listens on (the port was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/"


def aiptrain(*argv: str, home: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIPTRAIN_")}
    env.update({"AIPTRAIN_HOME": str(home), "NO_COLOR": "1"})
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "aiptrain", *argv], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=90)
    return result, time.monotonic() - started


def job(job_id: str, *args: str) -> object:
    return parse_job({"jobId": job_id, "trainingInput": {
        "region": "us-central1", "runtimeVersion": "2.11", "packageUris": [PACKAGE],
        "pythonModule": "trainer.task", "args": list(args)}})


@pytest.mark.parametrize("command", ["wait", "stream-logs"])
@pytest.mark.parametrize("backend", ["mlv1", "vertex"])
def test_timeout_is_honoured_when_the_endpoint_never_answers(command: str, backend: str, tmp_path: Path) -> None:
    result, elapsed = aiptrain("jobs", command, "m1", "--backend", backend, "--project", PROJECT,
                               "--region", "us-central1", "--api-endpoint", closed_port_url(),
                               "--timeout", "3", home=tmp_path)
    assert result.returncode == 12, result.stderr
    assert elapsed < 3 + 6  # the deadline, plus interpreter start-up; it used to run forever
    # At most one warning when the failures start, not one per attempt; then why it gave up. (On a
    # busy machine the backend's imports can take the whole 3 s, and the first failed attempt is
    # already past the deadline: then there is no warning, only the reason it gave up.)
    assert result.stderr.count("; retrying") <= 1, result.stderr
    assert "cannot reach http://127.0.0.1:" in result.stderr
    assert "gave up on job [m1] after 3 s" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("command", ["wait", "stream-logs"])
def test_without_timeout_an_endpoint_that_never_answers_fails_like_describe(command: str, tmp_path: Path) -> None:
    endpoint = closed_port_url()
    common = ("m1", "--backend", "mlv1", "--project", PROJECT, "--api-endpoint", endpoint)
    described, _ = aiptrain("jobs", "describe", *common, home=tmp_path)
    followed, elapsed = aiptrain("jobs", command, *common, home=tmp_path)
    assert described.returncode == followed.returncode == 1, followed.stderr
    assert elapsed < 30
    assert followed.stderr == described.stderr
    assert followed.stderr.startswith("error: projects.jobs.get: cannot reach http://127.0.0.1:")


def test_endpoint_lost_mid_follow_ends_at_the_timeout(tmp_path: Path, trainer_sdist: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPTRAIN_HOME", str(tmp_path / "home"))  # the server's local client finds its token
    with running_emulator(tmp_path / "home") as server:
        server.stage(trainer_sdist, PACKAGE)
        backend = MlV1Backend(BackendSettings(project=PROJECT, api_endpoint=server.url))
        backend.create_job(job("lost", "--lines", "1", "--sleep", "60"))  # type: ignore[arg-type]
        warnings: list[str] = []
        killed_at: list[float] = []

        def on_entry(entry: LogEntry) -> None:
            if not killed_at:  # the job was found and is running: now the service goes away
                server.process.send_signal(signal.SIGKILL)
                server.process.wait()
                killed_at.append(time.monotonic())

        started = time.monotonic()
        result = follow_job(backend, "lost", on_entry=on_entry, timeout=8, on_warning=warnings.append,
                            poller=AdaptivePoller(fast=0.2, ceiling=0.5))
        elapsed = time.monotonic() - started
    assert killed_at, "no log line arrived before the timeout"
    assert result.timed_out
    assert result.job.state is not None
    assert not JobState(result.job.state).is_terminal  # as last seen, before the service went away
    assert result.unreachable is not None and "cannot reach" in result.unreachable
    assert 8 <= elapsed < 8 + 2
    assert len(warnings) == 1 and warnings[0].endswith("; retrying")


def test_endpoint_restarting_mid_follow_is_retried_without_timeout(tmp_path: Path, trainer_sdist: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    # The server's local client: it finds the token, and the restarted server's new one.
    monkeypatch.setenv("AIPTRAIN_HOME", str(home))
    with running_emulator(home) as server:
        server.stage(trainer_sdist, PACKAGE)
        port = server.url.rstrip("/").rsplit(":", 1)[1]
        backend = MlV1Backend(BackendSettings(project=PROJECT, api_endpoint=server.url))
        backend.create_job(job("restarted", "--lines", "1", "--sleep", "14"))  # type: ignore[arg-type]
        warnings: list[str] = []
        replacement: list[subprocess.Popen[bytes]] = []

        def restart() -> None:
            # `aiptrain local serve` on the same home and port, once one call's own retries (at most
            # 7.5 s of back-off) are spent, so that the follower itself has to retry.
            time.sleep(9)
            env = {**os.environ, "AIPTRAIN_HOME": str(home)}
            replacement.append(subprocess.Popen(
                [sys.executable, "-m", "aiptrain", "local", "serve", "--port", port], cwd=REPO, env=env,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

        def on_entry(entry: LogEntry) -> None:
            if not replacement and server.process.poll() is None:
                server.process.send_signal(signal.SIGKILL)
                server.process.wait()
                threading.Thread(target=restart, daemon=True).start()

        try:
            result = follow_job(backend, "restarted", on_entry=on_entry, on_warning=warnings.append,
                                poller=AdaptivePoller(fast=0.2, ceiling=0.5))
        finally:
            wait_until(lambda: bool(replacement), timeout=10)
            for process in replacement:
                process.terminate()
                process.wait(timeout=10)
    assert not result.timed_out
    assert result.job.state == JobState.SUCCEEDED
    assert len(warnings) == 1 and "cannot reach" in warnings[0]
