"""The real `aiptrain` command against the emulator: --backend mlv1 / vertex, end to end.

Each run is a subprocess with its own environment, as a user or a CI pipeline would run it.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.emulator import REPO, Emulator, make_trainer_project, running_emulator, wait_until
from tests.fixtures.gcs import FakeGcsServer

PROJECT = "cli-project"


@pytest.fixture(scope="module")
def trainer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_trainer_project(tmp_path_factory.mktemp("cli-trainer"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, fake_gcs_server: FakeGcsServer) -> Iterator[Emulator]:
    env = {"STORAGE_EMULATOR_HOST": fake_gcs_server.endpoint}
    with running_emulator(tmp_path_factory.mktemp("cli-home"), env=env) as server:
        yield server


def elsewhere(served: Emulator, **env: str) -> dict[str, str]:
    """The environment of a client whose AIPTRAIN_HOME is not the server's: it is given the token."""
    assert served.token
    return {"AIPTRAIN_API_TOKEN": served.token, **env}


def aiptrain(*argv: str, home: Path, env: dict[str, str] | None = None,
             timeout: float = 180) -> subprocess.CompletedProcess[str]:
    full_env = {key: value for key, value in os.environ.items()
                if not key.startswith(("AIPTRAIN_", "STORAGE_EMULATOR_HOST"))}
    full_env.update({"AIPTRAIN_HOME": str(home), "NO_COLOR": "1", **(env or {})})
    return subprocess.run([sys.executable, "-m", "aiptrain", *argv], cwd=REPO, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def submit_args(backend: str, job_id: str, served: Emulator, trainer_dir: Path, staging: str,
                *trainer_args: str, options: tuple[str, ...] = ()) -> list[str]:
    return ["jobs", "submit", "training", job_id, "--backend", backend, "--project", PROJECT,
            "--api-endpoint", served.url, "--package-path", str(trainer_dir), "--module-name", "trainer.task",
            "--region", "us-central1", "--runtime-version", "2.11", "--staging-bucket", staging,
            "--job-dir", f"{staging}/out/{job_id}", "--stream-logs", *options, "--", *trainer_args]


def test_mlv1_submit_stream_logs_with_packages_in_fake_gcs(served: Emulator, trainer_dir: Path,
                                                           fake_gcs_server: FakeGcsServer, tmp_path: Path) -> None:
    bucket = fake_gcs_server.make_bucket()
    result = aiptrain(*submit_args("mlv1", "cli_mlv1", served, trainer_dir, bucket, "--lines", "2"),
                      home=tmp_path, env=elsewhere(served, STORAGE_EMULATOR_HOST=fake_gcs_server.endpoint))
    assert result.returncode == 0, result.stderr
    assert "jobId: cli_mlv1" in result.stdout and "state: SUCCEEDED" in result.stdout
    assert "Job [cli_mlv1] submitted successfully." in result.stderr
    assert "\tmaster-replica-0\t\tline 0 from chief-0" in result.stderr
    assert "\tmaster-replica-0\t\tline 1 from chief-0" in result.stderr
    # The package went to fake-gcs-server, not to any local store of the client.
    assert f"{bucket}/" in result.stderr
    assert not (tmp_path / "storage").exists()

    described = aiptrain("jobs", "describe", "cli_mlv1", "--backend", "mlv1", "--project", PROJECT,
                         "--api-endpoint", served.url, "--format", "json", home=tmp_path, env=elsewhere(served))
    assert described.returncode == 0, described.stderr
    assert '"state": "SUCCEEDED"' in described.stdout


def test_vertex_submit_failing_job_exits_10(served: Emulator, trainer_dir: Path) -> None:
    # The client shares the emulator's home, so `--storage local` stages where the engine reads.
    result = aiptrain(*submit_args("vertex", "cli_vertex_fails", served, trainer_dir, "gs://cli-local",
                                   "--exit-code", "4", options=("--storage", "local")), home=served.home)
    assert result.returncode == 10, result.stderr
    assert "state: FAILED" in result.stdout
    assert "failing on purpose" in result.stderr

    # Commands other than submit take the region from the environment, like gcloud's compute/region.
    listed = aiptrain("jobs", "list", "--backend", "vertex", "--project", PROJECT, "--api-endpoint", served.url,
                      home=served.home, env={"AIPTRAIN_REGION": "us-central1"})
    assert listed.returncode == 0, listed.stderr
    assert "cli_vertex_fails" in listed.stdout


def test_vertex_refusal_is_a_usage_error_before_anything_is_sent(served: Emulator, trainer_dir: Path,
                                                                 tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("trainingInput:\n  scheduling:\n    priority: 7\n")
    result = aiptrain(*submit_args("vertex", "cli_refused", served, trainer_dir, "gs://cli-local",
                                   options=("--config", str(config), "--storage", "local")), home=tmp_path,
                      env=elsewhere(served))
    assert result.returncode == 2, result.stderr
    assert "scheduling.priority" in result.stderr
    assert not (tmp_path / "storage").exists()  # nothing was uploaded


def test_cancel_and_wait_through_the_cli(served: Emulator, trainer_dir: Path) -> None:
    common = ["--backend", "mlv1", "--project", PROJECT, "--api-endpoint", served.url]
    submitted = aiptrain("jobs", "submit", "training", "cli_cancel", *common, "--package-path", str(trainer_dir),
                         "--module-name", "trainer.task", "--region", "us-central1", "--runtime-version", "2.11",
                         "--staging-bucket", "gs://cli-local", "--storage", "local", "--", "--sleep", "120",
                         home=served.home)
    assert submitted.returncode == 0, submitted.stderr
    engine = served.engine()
    wait_until(lambda: engine.get(PROJECT, "cli_cancel").state.value == "RUNNING")
    cancelled = aiptrain("jobs", "cancel", "cli_cancel", *common, home=served.home)
    assert cancelled.returncode == 0, cancelled.stderr
    waited = aiptrain("jobs", "wait", "cli_cancel", *common, home=served.home)
    assert waited.returncode == 11, waited.stderr


def test_token_never_printed_even_with_vv(tmp_path: Path, trainer_dir: Path) -> None:
    token = "tok-" + secrets.token_hex(16)
    with running_emulator(tmp_path / "home", token=token) as server:
        common = ["--backend", "mlv1", "--project", PROJECT, "--api-endpoint", server.url, "-vv"]
        # Another home: no token file to find, and no token given.
        refused = aiptrain("jobs", "describe", "nothing", *common, home=tmp_path / "client")
        assert refused.returncode == 1
        assert "UNAUTHENTICATED" in refused.stderr
        with_token = {"AIPTRAIN_API_TOKEN": token}
        result = aiptrain("jobs", "submit", "training", "cli_token", *common, "--package-path", str(trainer_dir),
                          "--module-name", "trainer.task", "--region", "us-central1", "--runtime-version", "2.11",
                          "--staging-bucket", "gs://cli-local", "--storage", "local", "--stream-logs",
                          home=server.home, env=with_token)
        assert result.returncode == 0, result.stderr
        listed = aiptrain("jobs", "list", *common, home=server.home, env=with_token)
        assert "cli_token" in listed.stdout
        logs = aiptrain("jobs", "stream-logs", "cli_token", *common, home=server.home, env=with_token)
        assert logs.returncode == 0
        for run in (refused, result, listed, logs):
            assert token not in run.stdout and token not in run.stderr
        assert token not in server.server_log()


def test_resubmitting_unchanged_sources_uploads_nothing(served: Emulator, trainer_dir: Path,
                                                        fake_gcs_server: FakeGcsServer, tmp_path: Path) -> None:
    bucket = fake_gcs_server.make_bucket()
    name = bucket.removeprefix("gs://")
    gcs = elsewhere(served, STORAGE_EMULATOR_HOST=fake_gcs_server.endpoint)

    def submit(job_id: str) -> subprocess.CompletedProcess[str]:
        args = [a for a in submit_args("mlv1", job_id, served, trainer_dir, bucket) if a != "--stream-logs"]
        return aiptrain(*args, home=tmp_path, env=gcs)

    first = submit("gcs_once_1")
    assert first.returncode == 0, first.stderr
    assert "uploaded" in first.stderr
    objects = fake_gcs_server.list_objects(name, "aiptrain/packages/")
    assert len(objects) == 1

    second = submit("gcs_once_2")
    assert second.returncode == 0, second.stderr
    assert "reused gs://" in second.stderr and "uploaded" not in second.stderr
    assert fake_gcs_server.list_objects(name, "aiptrain/packages/") == objects

    (trainer_dir / "extra.py").write_text("VALUE = 2\n")
    try:
        third = submit("gcs_once_3")
    finally:
        (trainer_dir / "extra.py").unlink()
    assert third.returncode == 0, third.stderr
    assert "uploaded" in third.stderr
    assert len(fake_gcs_server.list_objects(name, "aiptrain/packages/")) == 2


def test_missing_bucket_is_one_line_naming_it(served: Emulator, trainer_dir: Path,
                                              fake_gcs_server: FakeGcsServer, tmp_path: Path) -> None:
    args = [a for a in submit_args("mlv1", "gcs_missing", served, trainer_dir, "gs://no-such-bucket-here")
            if a != "--stream-logs"]
    result = aiptrain(*args, home=tmp_path, env=elsewhere(served, STORAGE_EMULATOR_HOST=fake_gcs_server.endpoint))
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no-such-bucket-here" in errors[0]
    assert "submitted" not in result.stderr


def test_bad_invocation_with_gcs_staging_writes_nothing(served: Emulator, trainer_dir: Path,
                                                        fake_gcs_server: FakeGcsServer, tmp_path: Path) -> None:
    bucket = fake_gcs_server.make_bucket()
    args = submit_args("mlv1", "bad-id", served, trainer_dir, bucket, options=("--region", "nowhere"))
    result = aiptrain(*args, home=tmp_path,
                      env={"STORAGE_EMULATOR_HOST": fake_gcs_server.endpoint})
    assert result.returncode == 2
    assert "jobId" in result.stderr and "trainingInput.region" in result.stderr
    assert fake_gcs_server.list_objects(bucket.removeprefix("gs://")) == []
