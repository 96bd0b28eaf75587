"""Jobs created through `aiptrain local serve` (the real discovery client) run in their
runtime's environment too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from googleapiclient import discovery

from aiptrain._environments.store import Environment
from aiptrain._packaging import build_package
from tests.fixtures.emulator import TERMINAL, running_emulator, wait_until

from .conftest import TRAINERS

pytestmark = [pytest.mark.slow, pytest.mark.runtime_envs]


def test_a_job_created_through_the_emulator_runs_in_its_runtime_environment(
    runtime_envs: Path, built_environment: Environment, tmp_path: Path
) -> None:
    sdist = build_package(TRAINERS / "xgboost_pinned" / "trainer", cache_dir=tmp_path / "sdists").path
    with running_emulator(tmp_path / "served") as served:
        uri = served.stage(sdist, f"gs://served-bucket/packages/{sdist.name}")
        jobs = discovery.build("ml", "v1", static_discovery=True, cache_discovery=False,
                               credentials=served.credentials(),
                               client_options={"api_endpoint": served.url}).projects().jobs()
        body = {"jobId": "served_env", "trainingInput": {
            "scaleTier": "BASIC", "region": "us-central1", "runtimeVersion": "1.15", "pythonVersion": "3.7",
            "packageUris": [uri],
            "pythonModule": "trainer.task", "jobDir": "gs://served-bucket/out"}}
        jobs.create(parent="projects/envs-project", body=body).execute()

        def finished() -> dict[str, Any] | None:
            job: dict[str, Any] = jobs.get(name="projects/envs-project/jobs/served_env").execute()
            return job if job.get("state") in TERMINAL else None

        job = wait_until(finished, timeout=300)
        assert job["state"] == "SUCCEEDED", job
        engine = served.engine()
        record = engine.store.get("envs-project", "served_env")
        lines = [entry.message for entry in engine.store.read_logs(record.key, limit=1000)]
        started = f"Starting master-replica-0: {built_environment.python} -m trainer.task"
        assert any(line.startswith(started) for line in lines), lines
        assert (served.storage / "served-bucket" / "out" / "result.json").exists()
