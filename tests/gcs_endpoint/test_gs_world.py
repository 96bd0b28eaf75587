"""An AI Platform trainer that builds its own gs:// paths runs unchanged on the local backend.

One real TensorFlow job (tests/gcs_endpoint/trainers/gsworld): tf.data reads a CSV glob, checkpoints,
summaries, a SavedModel and tf.io.gfile files are written under --job-dir, google-cloud-storage
lists them, pandas reads a CSV, and a Google host other than storage is refused. Everything it
wrote is in the local store, where `jobs describe`'s jobDir says.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._gcs_endpoint.service import UPSTREAM_VARIABLE
from aiptrain._job.spec import JobState
from aiptrain._packaging import build_package
from tests.fixtures.gcs import FakeGcsServer, fake_gcs_server
from tests.fixtures.local_jobs import PROJECT, make_job, training_input, wait_for_end

TRAINERS = Path(__file__).parent / "trainers"
pytestmark = pytest.mark.slow
__all__ = ["fake_gcs_server"]


@pytest.fixture
def world_package(home: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    built = build_package(TRAINERS / "gsworld", cache_dir=tmp_path_factory.mktemp("gsworld-sdist"))
    target = home / "storage" / "staging" / built.path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(built.path, target)
    return f"gs://staging/{built.path.name}"


def test_a_trainer_that_builds_gs_paths_from_a_bucket_flag_runs_unchanged(
    engine: LocalJobEngine, home: Path, world_package: str
) -> None:
    data = home / "storage" / "babyweight" / "world" / "data"
    data.mkdir(parents=True)
    (data / "train-0.csv").write_text("a,b,y\n" + "".join(f"{i},{i + 1},{2 * i}\n" for i in range(10)))
    (data / "train-1.csv").write_text("a,b,y\n" + "".join(f"{i},{i},{i}\n" for i in range(7)))
    (data / "other.csv").write_text("a,b,y\n1,1,1\n")  # not matched by the glob
    inputs = training_input(world_package, "gsworld.task", job_dir="gs://babyweight/world/out",
                            args=["--bucket", "babyweight"])
    engine.submit(PROJECT, make_job("world", inputs))
    done = wait_for_end(engine, "world", timeout=600)
    log = "\n".join(f"{e.task_name}: {e.message}" for e in engine.logs(PROJECT, "world"))
    assert done.state == JobState.SUCCEEDED, log
    assert done.training_input is not None and done.training_input.job_dir == "gs://babyweight/world/out"

    out = home / "storage" / "babyweight" / "world" / "out"
    report = json.loads((out / "report.json").read_text())
    assert report["files"] == ["gs://babyweight/world/data/train-0.csv", "gs://babyweight/world/data/train-1.csv"]
    assert report["rows"] == 17
    assert report["latest_checkpoint"] == "gs://babyweight/world/out/checkpoints/ckpt-2"
    assert report["notes"] == ["hello.txt"]
    assert report["pandas_shape"] == [10, 3]
    assert report["model_loads"] is True
    assert "403" in report["elsewhere"], report["elsewhere"]
    listed = report["listed"]
    assert {"checkpoints/checkpoint", "checkpoints/ckpt-2.index", "model/saved_model.pb", "notes/hello.txt"} <= set(
        listed)
    assert "checkpoints/ckpt-0.index" not in listed, "max_to_keep=2 deleted the oldest checkpoint"
    assert any(name.startswith("logs/events.out.tfevents.") for name in listed)
    # The files themselves, where the local store keeps them.
    assert (out / "model" / "saved_model.pb").is_file()
    assert (out / "notes" / "hello.txt").read_text() == "written with tf.io.gfile"
    assert sorted(p.name for p in (out / "checkpoints").glob("*.index")) == ["ckpt-1.index", "ckpt-2.index"]
    assert "Using local storage" not in log, "nothing was rewritten"


def test_with_a_gcs_emulator_as_the_jobs_storage_the_trainer_reads_and_writes_it(
    engine: LocalJobEngine, home: Path, world_package: str, fake_gcs_server: FakeGcsServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What `aiptrain local serve` sets for its jobs when its clients stage into a GCS emulator.
    monkeypatch.setenv(UPSTREAM_VARIABLE, fake_gcs_server.endpoint)
    bucket = fake_gcs_server.make_bucket().removeprefix("gs://")
    fake_gcs_server.put_object(f"gs://{bucket}/world/data/train-0.csv", b"a,b,y\n1,2,3\n4,5,6\n")
    inputs = training_input(world_package, "gsworld.task", job_dir=f"gs://{bucket}/world/out",
                            args=["--bucket", bucket])
    engine.submit(PROJECT, make_job("world_emulated", inputs))
    done = wait_for_end(engine, "world_emulated", timeout=600)
    log = "\n".join(f"{e.task_name}: {e.message}" for e in engine.logs(PROJECT, "world_emulated"))
    assert done.state == JobState.SUCCEEDED, log
    report = json.loads(fake_gcs_server.read_object(f"gs://{bucket}/world/out/report.json"))
    assert report["rows"] == 2 and report["pandas_shape"] == [2, 3]
    assert "checkpoints/ckpt-2.index" in report["listed"] and "model/saved_model.pb" in report["listed"]
    assert "world/out/notes/hello.txt" in fake_gcs_server.list_objects(bucket, prefix="world/out/notes/")
    assert not (home / "storage" / bucket).exists(), "nothing went to the local store"
