"""A trainer that moves its files with the Cloud SDK's `gsutil` (as AI Platform's scikit-learn and
XGBoost samples did) or `gcloud storage` runs unchanged: gsutil reaches the job's storage endpoint
through the proxy, trusting the installation's CA, gcloud through its endpoint override; both
upload, download (checking the MD5 the endpoint reports), list and read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._job.spec import JobState
from aiptrain._packaging import build_package
from tests.fixtures.local_jobs import PROJECT, make_job, training_input, wait_for_end

TRAINERS = Path(__file__).parent / "trainers"
pytestmark = pytest.mark.slow


def test_a_trainer_that_calls_gsutil_cp_reads_and_writes_the_local_store(
    engine: LocalJobEngine, home: Path, tmp_path: Path
) -> None:
    assert shutil.which("gsutil"), "the Google Cloud CLI (gsutil) is installed on every machine of this project"
    built = build_package(TRAINERS / "gsutilcp", cache_dir=tmp_path / "sdist")
    staged = home / "storage" / "staging" / built.path.name
    staged.parent.mkdir(parents=True)
    shutil.copy(built.path, staged)
    data = home / "storage" / "census" / "data" / "adult.csv"
    data.parent.mkdir(parents=True)
    data.write_text("a,y\n1,2\n3,4\n5,9\n")

    inputs = training_input(f"gs://staging/{built.path.name}", "gsutilcp.task", job_dir="gs://census/jobs/g1",
                            args=["--data", "gs://census/data/adult.csv"])
    engine.submit(PROJECT, make_job("g1", inputs))
    done = wait_for_end(engine, "g1", timeout=600)
    lines = [entry.message for entry in engine.logs(PROJECT, "g1")]
    assert done.state == JobState.SUCCEEDED, "\n".join(lines)

    export = home / "storage" / "census" / "jobs" / "g1" / "export"
    assert json.loads((export / "model.json").read_text()) == {"rows": 3, "mean_y": 5.0}
    assert (export / "notes.txt").read_text() == "trained with gsutil\n"
    listed = next(json.loads(line.removeprefix("listed ")) for line in lines if line.startswith("listed "))
    assert listed == ["gs://census/jobs/g1/export/model.json", "gs://census/jobs/g1/export/notes.txt"]
    assert any(line.startswith('read back {"rows": 3') for line in lines)
    assert (home / "storage" / "census" / "jobs" / "g1" / "gcloud" / "notes.txt").read_text() == "trained with gsutil\n"
    assert "gcloud storage round trip trained with gsutil" in lines
