"""What gcloud relies on beyond create/get/list/cancel, through a plain discovery client:
ml v1 `patch` (labels, etag), `entries:list` newest first and without a job filter, project
numbers, `consumedMLUnits`, and the wording of duplicate IDs and late cancels.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from googleapiclient.errors import HttpError

from aiptrain._emulator.projects import project_number_for
from tests.emulator.test_plain_client import body, client
from tests.fixtures.emulator import Emulator, error_of, ml_job_when_done

PROJECT = "plain-project"  # the package the helpers stage and name lives in this project's bucket
PACKAGE_URI = "gs://plain-bucket/packages/trainer.tar.gz"


@pytest.fixture(scope="module")
def ml(emulator: Emulator, trainer_sdist: Path) -> Iterator[Any]:
    emulator.stage(trainer_sdist, PACKAGE_URI)
    jobs = client("ml", "v1", emulator).projects().jobs()
    for job_id in ("surface_a", "surface_b"):
        jobs.create(parent=f"projects/{PROJECT}", body=body(job_id, "--lines", "3")).execute()
    for job_id in ("surface_a", "surface_b"):
        ml_job_when_done(jobs, PROJECT, job_id)
    yield jobs


def name(job_id: str) -> str:
    return f"projects/{PROJECT}/jobs/{job_id}"


def test_patch_replaces_labels_and_honours_the_etag(ml: Any) -> None:
    before = ml.get(name=name("surface_a")).execute()
    patched = ml.patch(name=name("surface_a"), updateMask="labels",
                       body={"labels": {"owner": "ci", "color": "blue"}}).execute()
    assert patched["labels"] == {"owner": "ci", "color": "blue"}
    assert patched["etag"] != before["etag"]
    assert ml.get(name=name("surface_a")).execute()["labels"] == {"owner": "ci", "color": "blue"}

    with pytest.raises(HttpError) as raised:  # the etag read before the first patch is stale now
        ml.patch(name=name("surface_a"), updateMask="labels,etag",
                 body={"labels": {"owner": "late"}, "etag": before["etag"]}).execute()
    assert raised.value.resp.status == 409 and error_of(raised)["status"] == "ABORTED"
    current = ml.get(name=name("surface_a")).execute()
    assert current["labels"] == {"owner": "ci", "color": "blue"}
    fresh = ml.patch(name=name("surface_a"), updateMask="labels,etag",
                     body={"labels": {"owner": "fresh"}, "etag": current["etag"]}).execute()
    assert fresh["labels"] == {"owner": "fresh"}

    for mask, labels in (("", {"a": "b"}), ("trainingInput", {"a": "b"}), ("labels", {"Bad Key": "x"})):
        with pytest.raises(HttpError) as raised:
            ml.patch(name=name("surface_a"), updateMask=mask or None, body={"labels": labels}).execute()
        assert raised.value.resp.status == 400, mask
    with pytest.raises(HttpError) as raised:
        ml.patch(name=name("surface_nobody"), updateMask="labels", body={"labels": {}}).execute()
    assert raised.value.resp.status == 404


def test_duplicate_ids_late_cancels_and_ml_units(ml: Any) -> None:
    with pytest.raises(HttpError) as raised:
        ml.create(parent=f"projects/{PROJECT}", body=body("surface_a")).execute()
    error = error_of(raised)
    assert raised.value.resp.status == 409 and error["status"] == "ALREADY_EXISTS"
    assert error["details"][0]["fieldViolations"] == [
        {"field": "job.job_id", "description": "A job with this id already exists."}]

    with pytest.raises(HttpError) as raised:
        ml.cancel(name=name("surface_b"), body={}).execute()
    assert raised.value.resp.status == 400 and error_of(raised)["status"] == "FAILED_PRECONDITION"
    assert "terminal state (SUCCEEDED)" in error_of(raised)["message"]

    job = ml.get(name=name("surface_b")).execute()
    assert isinstance(job["trainingOutput"]["consumedMLUnits"], float)
    # A project number this emulator handed out names the same project.
    by_number = ml.get(name=f"projects/{project_number_for(PROJECT)}/jobs/surface_b").execute()
    assert by_number["jobId"] == "surface_b"


def entries(emulator: Emulator, **request: Any) -> list[dict[str, Any]]:
    logging = client("logging", "v2", emulator).entries()
    found: list[dict[str, Any]] = []
    page = logging.list(body={"resourceNames": [f"projects/{PROJECT}"], **request}).execute()
    while True:
        found += page.get("entries", [])
        if not page.get("nextPageToken"):
            return found
        page = logging.list(body={"resourceNames": [f"projects/{PROJECT}"], **request,
                                  "pageToken": page["nextPageToken"]}).execute()


def test_entries_newest_first_and_across_jobs(ml: Any, emulator: Emulator) -> None:
    one_job = 'resource.labels.job_id="surface_a"'
    oldest_first = entries(emulator, filter=one_job, pageSize=1000)
    newest_first = entries(emulator, filter=one_job, orderBy="timestamp desc", pageSize=4)
    assert len(oldest_first) > 4
    assert newest_first == list(reversed(oldest_first))

    # No job named: every job of the project, with any filter (here: trainer lines only).
    trainer_lines = entries(emulator, filter='resource.type="ml_job" AND labels.task_name="master-replica-0" '
                                             'AND textPayload:"line 0"', orderBy="timestamp desc", pageSize=1)
    assert {e["resource"]["labels"]["job_id"] for e in trainer_lines} >= {"surface_a", "surface_b"}
    stamps = [(e["timestamp"], e["insertId"]) for e in trainer_lines]
    assert stamps == sorted(stamps, reverse=True)
    assert entries(emulator, filter='severity>=ERROR AND resource.labels.job_id="surface_a"') == []

    with pytest.raises(HttpError) as raised:
        entries(emulator, filter=one_job, orderBy="severity desc")
    assert raised.value.resp.status == 400
