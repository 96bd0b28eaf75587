"""What `local serve --backend ray` checks at start, before any cluster is needed: its flags and
variables, and that one server runs a home's jobs on Ray (no cluster answers at these addresses)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.emulator import start_ray_server

NOBODY = "http://127.0.0.1:9"  # the discard port: no Ray Jobs API answers there


def serve(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A `local serve` expected to exit at once (a usage error)."""
    return subprocess.run([sys.executable, "-m", "aiptrain", "local", "serve", "--port", "0", "--no-grpc",
                           "--no-proxy", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "AIPTRAIN_HOME": str(home), **(env or {})})


def test_a_second_server_on_the_same_home_is_refused_while_the_first_runs_its_jobs_on_ray(tmp_path: Path) -> None:
    first = start_ray_server(tmp_path / "home", NOBODY)
    try:
        log = first.server_log()
        assert f"Its jobs run on the Ray cluster at {NOBODY}" in log
        assert "warning: the Ray cluster does not answer yet" in log
        second = serve(tmp_path / "home", "--backend", "ray", "--ray-address", NOBODY)
        assert second.returncode == 2, second.stderr
        assert "runs the jobs of" in second.stderr and "already" in second.stderr
        assert first.process.poll() is None
    finally:
        first.stop()
    # Gone with its process: the home is free again.
    third = start_ray_server(tmp_path / "home", NOBODY)
    third.stop()


def test_backends_a_server_cannot_run_jobs_on_are_usage_errors_and_bad_ray_settings_exit_2(tmp_path: Path) -> None:
    typed = serve(tmp_path / "home", "--backend", "mlv1")
    assert typed.returncode == 2 and "'mlv1' is not one of 'local', 'ray'" in typed.stderr, typed.stderr
    before = subprocess.run([sys.executable, "-m", "aiptrain", "--backend", "vertex", "local", "serve", "--port", "0"],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "AIPTRAIN_HOME": str(tmp_path / "home")})
    assert before.returncode == 2 and "not on vertex" in before.stderr, before.stderr
    scale = serve(tmp_path / "home", "--backend", "ray", "--ray-address", NOBODY, "--ray-resource-scale", "2")
    assert scale.returncode == 2 and "--ray-resource-scale" in scale.stderr, scale.stderr
    address = serve(tmp_path / "home", "--backend", "ray", "--ray-address", "ftp://head:8265")
    assert address.returncode == 2 and "ftp://head:8265" in address.stderr, address.stderr
    bound = serve(tmp_path / "home", "--backend", "ray", "--ray-address", NOBODY,
                  env={"AIPTRAIN_SERVE_RAY_UNREACHABLE_SECONDS": "soon"})
    assert bound.returncode == 2 and "AIPTRAIN_SERVE_RAY_UNREACHABLE_SECONDS" in bound.stderr, bound.stderr


def test_a_client_shells_aiptrain_backend_does_not_move_the_servers_jobs(tmp_path: Path) -> None:
    """AIPTRAIN_BACKEND=mlv1 says where a shell's clients send jobs (often to this very server)."""
    process = subprocess.Popen([sys.executable, "-m", "aiptrain", "local", "serve", "--port", "0", "--no-grpc",
                                "--no-proxy"], stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "AIPTRAIN_HOME": str(tmp_path / "home"), "AIPTRAIN_BACKEND": "mlv1"})
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        second = process.stderr.readline()
        assert first.startswith("Serving ml v1"), first
        assert "Ray cluster" not in second, second
    finally:
        process.terminate()
        process.wait(30)
