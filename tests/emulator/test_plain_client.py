"""The emulator driven by plain googleapiclient clients, as any third-party tool would drive it.

Nothing here uses aiptrain's backends: the clients are built in the test from the static
discovery documents, so what passes here is what the ml v1 / aiplatform v1 / logging v2 wire
contract requires, not what our own client happens to send.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from googleapiclient import discovery
from googleapiclient.errors import HttpError

from aiptrain._emulator.projects import project_number_for
from tests.fixtures.emulator import Emulator, error_of, ml_job_when_done, wait_until

PROJECT = "plain-project"
PACKAGE_URI = "gs://plain-bucket/packages/trainer.tar.gz"


def client(api: str, version: str, emulator: Emulator) -> Any:
    """A client with the token the server wrote at start, as a third-party tool would be given it."""
    return discovery.build(api, version, static_discovery=True, cache_discovery=False,
                           credentials=emulator.credentials(), client_options={"api_endpoint": emulator.url})


@pytest.fixture(scope="module")
def ml(emulator: Emulator, trainer_sdist: Path) -> Iterator[Any]:
    emulator.stage(trainer_sdist, PACKAGE_URI)
    yield client("ml", "v1", emulator).projects().jobs()


def body(job_id: str, *args: str, **training_input: Any) -> dict[str, Any]:
    return {"jobId": job_id, "labels": {"suite": "plain"}, "trainingInput": {
        "scaleTier": "BASIC", "region": "us-central1", "runtimeVersion": "2.11",
        "packageUris": [PACKAGE_URI], "pythonModule": "trainer.task", "args": list(args), **training_input}}




def test_create_get_and_run_to_success(ml: Any) -> None:
    created = ml.create(parent=f"projects/{PROJECT}", body=body("plain_ok", "--lines", "2")).execute()
    assert created["jobId"] == "plain_ok"
    assert created["state"] in ("QUEUED", "PREPARING", "RUNNING")
    assert created["trainingInput"]["packageUris"] == [PACKAGE_URI]
    assert created["labels"] == {"suite": "plain"}
    assert "createTime" in created
    job = ml_job_when_done(ml, PROJECT, "plain_ok")
    assert job["state"] == "SUCCEEDED", job
    assert "endTime" in job


def test_logs_through_plain_logging_client_with_gcloud_filter(ml: Any, emulator: Emulator) -> None:
    if not _exists(ml, "plain_ok"):  # when run on its own
        ml.create(parent=f"projects/{PROJECT}", body=body("plain_ok", "--lines", "2")).execute()
    ml_job_when_done(ml, PROJECT, "plain_ok")
    logging = client("logging", "v2", emulator)
    gcloud_filter = ('(resource.type="ml_job" OR resource.type="cloudml_job") AND resource.labels.job_id="plain_ok"'
                     ' AND timestamp>="1970-01-01T01:00:00.000000000Z"')
    response = logging.entries().list(body={"resourceNames": [f"projects/{PROJECT}"], "filter": gcloud_filter,
                                            "orderBy": "timestamp asc", "pageSize": 1000}).execute()
    entries = response["entries"]
    texts = [e["textPayload"] for e in entries]
    assert "line 0 from chief-0" in texts and "line 1 from chief-0" in texts
    first = next(e for e in entries if e["textPayload"] == "line 0 from chief-0")
    assert first["resource"] == {"type": "ml_job", "labels": {"project_id": PROJECT, "job_id": "plain_ok",
                                                              "task_name": "master-replica-0"}}
    assert first["labels"]["task_name"] == "master-replica-0"
    assert first["severity"] in ("INFO", "DEFAULT")
    stamps = [(e["timestamp"], e["insertId"]) for e in entries]
    assert stamps == sorted(stamps)

    # Pages of 2 give the same entries in the same order.
    paged: list[dict[str, Any]] = []
    request_body: dict[str, Any] = {"resourceNames": [f"projects/{PROJECT}"], "filter": gcloud_filter,
                                    "pageSize": 2}
    while True:
        page = logging.entries().list(body=request_body).execute()
        paged += page.get("entries", [])
        if "nextPageToken" not in page:
            break
        request_body["pageToken"] = page["nextPageToken"]
    assert [e["insertId"] for e in paged] == [e["insertId"] for e in entries]

    # gcloud's follow-up poll: after the last (timestamp, insertId), and one task only.
    last = entries[-3]
    follow_filter = (f'resource.labels.job_id="plain_ok" AND ((timestamp="{last["timestamp"]}" AND '
                     f'insertId>"{last["insertId"]}") OR timestamp>"{last["timestamp"]}") AND '
                     '(resource.labels.task_name="master-replica-0" OR labels.task_name="master-replica-0")')
    rest = logging.entries().list(body={"resourceNames": [f"projects/{PROJECT}"],
                                        "filter": follow_filter}).execute()
    expected = [e["insertId"] for e in entries[-2:] if e["labels"]["task_name"] == "master-replica-0"]
    assert [e["insertId"] for e in rest.get("entries", [])] == expected


def _exists(ml: Any, job_id: str) -> bool:
    try:
        ml.get(name=f"projects/{PROJECT}/jobs/{job_id}").execute()
    except HttpError:
        return False
    return True


def test_list_filter_and_pages(ml: Any) -> None:
    for job_id in ("listed_a", "listed_b", "listed_c"):
        ml.create(parent=f"projects/{PROJECT}", body=body(job_id, "--lines", "0")).execute()
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        page = ml.list(parent=f"projects/{PROJECT}", filter="jobId:listed_*", pageSize=2, pageToken=token).execute()
        pages += 1
        seen += [job["jobId"] for job in page["jobs"]]
        token = page.get("nextPageToken")
        if not token:
            break
    assert sorted(seen) == ["listed_a", "listed_b", "listed_c"]
    assert pages == 2
    assert ml.list(parent=f"projects/{PROJECT}", filter="jobId:nothing_*").execute() == {}
    assert ml.list(parent="projects/empty-project").execute() == {}
    # These jobs print nothing and end within seconds: wait for them rather than cancel them (a
    # cancel races their end, and a job that already ended answers 400 FAILED_PRECONDITION).
    for job_id in ("listed_a", "listed_b", "listed_c"):
        assert ml_job_when_done(ml, PROJECT, job_id)["state"] == "SUCCEEDED"
    assert ml.list(parent=f"projects/{PROJECT}", filter="jobId:listed_* AND state:FAILED").execute() == {}


def test_cancel(ml: Any) -> None:
    ml.create(parent=f"projects/{PROJECT}", body=body("to_cancel", "--sleep", "120")).execute()
    wait_until(lambda: ml.get(name=f"projects/{PROJECT}/jobs/to_cancel").execute()["state"] == "RUNNING")
    assert ml.cancel(name=f"projects/{PROJECT}/jobs/to_cancel", body={}).execute() == {}
    assert ml_job_when_done(ml, PROJECT, "to_cancel")["state"] == "CANCELLED"
    with pytest.raises(HttpError) as raised:
        ml.cancel(name=f"projects/{PROJECT}/jobs/to_cancel", body={}).execute()
    assert raised.value.resp.status == 400
    assert error_of(raised)["status"] == "FAILED_PRECONDITION"


def test_bad_job_id_is_400_on_job_id(ml: Any) -> None:
    with pytest.raises(HttpError) as raised:
        ml.create(parent=f"projects/{PROJECT}", body=body("1bad-id")).execute()
    assert raised.value.resp.status == 400
    error = error_of(raised)
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["details"] == [{
        "@type": "type.googleapis.com/google.rpc.BadRequest",
        "fieldViolations": [{"field": "job_id", "description": "A name should start with a letter and contain "
                             "only letters, numbers and underscores."}],
    }]


def test_unknown_field_and_bad_enum_are_400_with_violations(ml: Any) -> None:
    bad = body("bad_fields")
    bad["trainingInput"]["scaleTeir"] = "BASIC"
    bad["trainingInput"]["scaleTier"] = "MEGA"
    bad["trainingInput"]["workerCount"] = "lots"
    with pytest.raises(HttpError) as raised:
        ml.create(parent=f"projects/{PROJECT}", body=bad).execute()
    assert raised.value.resp.status == 400
    violations = error_of(raised)["details"][0]["fieldViolations"]
    assert sorted(v["field"] for v in violations) == [
        "job.training_input", "job.training_input.scale_tier", "job.training_input.worker_count"]
    unknown = next(v for v in violations if v["field"] == "job.training_input")
    assert 'Unknown name "scaleTeir"' in unknown["description"]
    assert _exists(ml, "bad_fields") is False


def test_duplicate_is_409(ml: Any) -> None:
    ml.create(parent=f"projects/{PROJECT}", body=body("twice", "--lines", "0")).execute()
    with pytest.raises(HttpError) as raised:
        ml.create(parent=f"projects/{PROJECT}", body=body("twice")).execute()
    assert raised.value.resp.status == 409
    assert error_of(raised)["status"] == "ALREADY_EXISTS"
    ml_job_when_done(ml, PROJECT, "twice")


def test_missing_job_is_404(ml: Any) -> None:
    for call in (ml.get(name=f"projects/{PROJECT}/jobs/no_such_job"),
                 ml.cancel(name=f"projects/{PROJECT}/jobs/no_such_job", body={})):
        with pytest.raises(HttpError) as raised:
            call.execute()
        assert raised.value.resp.status == 404
        assert error_of(raised)["status"] == "NOT_FOUND"


def test_paths_outside_the_store_are_refused(ml: Any) -> None:
    for uri in ("gs://plain-bucket/../../etc/passwd", "/etc/passwd", "gs://UPPER/x.tar.gz", "gs://b/a//b"):
        with pytest.raises(HttpError) as raised:
            ml.create(parent=f"projects/{PROJECT}", body=body("escape", packageUris=[uri])).execute()
        assert raised.value.resp.status == 400, uri
        assert error_of(raised)["details"][0]["fieldViolations"][0]["field"] == "job.training_input.package_uris[0]"
    with pytest.raises(HttpError) as raised:
        ml.create(parent=f"projects/{PROJECT}", body=body("escape", jobDir="/tmp/elsewhere")).execute()
    assert error_of(raised)["details"][0]["fieldViolations"][0]["field"] == "job.training_input.job_dir"
    # Trainer arguments that name gs:// locations are mapped into the store when the job starts,
    # so they are held to the same rule, up front, with the argument's index.
    for args in (["--x", "gs://plain-bucket/../../../../tmp/escape2"], ["--x", "--out=gs://plain-bucket/a/../b"]):
        with pytest.raises(HttpError) as raised:
            ml.create(parent=f"projects/{PROJECT}", body=body("escape", *args)).execute()
        assert raised.value.resp.status == 400, args
        violation = error_of(raised)["details"][0]["fieldViolations"][0]
        assert violation["field"] == "job.training_input.args[1]"
        uri = args[1][args[1].index("gs://"):]
        assert repr(uri) in violation["description"] and "plain relative path" in violation["description"]
    assert _exists(ml, "escape") is False


# -- Vertex AI customJobs ------------------------------------------------------------------------


def custom_job(display_name: str, *args: str, pools: int = 1) -> dict[str, Any]:
    package = {"executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest",
               "packageUris": [PACKAGE_URI], "pythonModule": "trainer.task", "args": list(args)}
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "pythonPackageSpec": package}
    return {"displayName": display_name, "labels": {"suite": "plain"},
            "jobSpec": {"workerPoolSpecs": [pool] * pools,
                        "baseOutputDirectory": {"outputUriPrefix": "gs://plain-bucket/out"}}}


def test_custom_jobs(emulator: Emulator, ml: Any) -> None:
    jobs = client("aiplatform", "v1", emulator).projects().locations().customJobs()
    parent = f"projects/{PROJECT}/locations/us-central1"
    created = jobs.create(parent=parent, body=custom_job("vertex one", "--lines", "1")).execute()
    # Vertex names a job by project number; the ID and the number both find it.
    assert created["name"].startswith(f"projects/{project_number_for(PROJECT)}/locations/us-central1/customJobs/")
    numeric = created["name"].rsplit("/", 1)[1]
    assert jobs.get(name=f"{parent}/customJobs/{numeric}").execute()["name"] == created["name"]
    assert numeric.isdigit() and len(numeric) == 19
    assert created["displayName"] == "vertex one"
    assert created["state"] in ("JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING")

    def done() -> dict[str, Any] | None:
        job: dict[str, Any] = jobs.get(name=created["name"]).execute()
        return job if job["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED") else None

    final = wait_until(done)
    assert final["state"] == "JOB_STATE_SUCCEEDED", final
    assert final["jobSpec"] == created["jobSpec"]
    assert {"createTime", "startTime", "endTime", "updateTime"} <= set(final)

    logging = client("logging", "v2", emulator)
    entries = logging.entries().list(body={
        "resourceNames": [f"projects/{PROJECT}"],
        "filter": f'resource.type="ml_job" AND resource.labels.job_id="{numeric}"'}).execute()["entries"]
    line = next(e for e in entries if e["textPayload"].startswith("line 0"))
    assert line["resource"]["labels"]["task_name"] == "workerpool0-0"
    # Vertex passes the output directory in AIP_MODEL_DIR only, never as a --job-dir argument.
    trainer_lines = [e["textPayload"] for e in entries if e["resource"]["labels"]["task_name"] == "workerpool0-0"]
    assert "job-dir=None" in trainer_lines

    listed = jobs.list(parent=parent, filter='display_name="vertex one"').execute()
    assert [j["name"] for j in listed["customJobs"]] == [created["name"]]
    # The engine job behind it is no ml v1 job.
    assert all(not j["jobId"].startswith("customjob_") for j in ml.list(
        parent=f"projects/{PROJECT}").execute().get("jobs", []))
    assert jobs.list(parent=parent, filter='display_name="nobody"').execute() == {}
    assert jobs.list(parent="projects/other-project/locations/us-central1").execute() == {}

    sleeper = jobs.create(parent=parent, body=custom_job("vertex sleeper", "--sleep", "120")).execute()
    assert jobs.cancel(name=sleeper["name"], body={}).execute() == {}
    cancelled = wait_until(lambda: (j := jobs.get(name=sleeper["name"]).execute())["state"] == "JOB_STATE_CANCELLED"
                           and j)
    assert cancelled["error"]["code"] == 1

    with pytest.raises(HttpError) as raised:
        jobs.get(name=f"{parent}/customJobs/1234567890123456789").execute()
    assert raised.value.resp.status == 404


def test_custom_job_refusals(emulator: Emulator) -> None:
    jobs = client("aiplatform", "v1", emulator).projects().locations().customJobs()
    parent = f"projects/{PROJECT}/locations/us-central1"
    container = custom_job("container")
    pool = container["jobSpec"]["workerPoolSpecs"][0]
    del pool["pythonPackageSpec"]
    pool["containerSpec"] = {"imageUri": "gcr.io/p/t:1"}
    with pytest.raises(HttpError) as raised:  # no container engine answers in the suite's environment
        jobs.create(parent=parent, body=container).execute()
    assert raised.value.resp.status == 400
    # The request is right; this machine cannot run it, as with what else a local job cannot honour.
    assert error_of(raised)["status"] == "FAILED_PRECONDITION"
    assert "custom containers need a container engine" in error_of(raised)["message"]

    mixed = custom_job("mixed", pools=2)
    mixed["jobSpec"]["workerPoolSpecs"][1] = {**mixed["jobSpec"]["workerPoolSpecs"][1], "pythonPackageSpec": None,
                                              "containerSpec": {"imageUri": "gcr.io/p/t:1"}}
    del mixed["jobSpec"]["workerPoolSpecs"][1]["pythonPackageSpec"]
    with pytest.raises(HttpError) as raised:
        jobs.create(parent=parent, body=mixed).execute()
    assert error_of(raised)["status"] == "FAILED_PRECONDITION"
    assert error_of(raised)["details"][0]["fieldViolations"][0]["field"] == (
        "custom_job.job_spec.worker_pool_specs[1].container_spec")

    different = custom_job("different", pools=2)
    different["jobSpec"]["workerPoolSpecs"][1] = json.loads(json.dumps(different["jobSpec"]["workerPoolSpecs"][1]))
    different["jobSpec"]["workerPoolSpecs"][1]["pythonPackageSpec"]["pythonModule"] = "other.task"
    with pytest.raises(HttpError) as raised:
        jobs.create(parent=parent, body=different).execute()
    assert error_of(raised)["details"][0]["fieldViolations"][0]["field"] == (
        "custom_job.job_spec.worker_pool_specs[1].python_package_spec")

    nameless_env = custom_job("nameless env")
    nameless_env["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["env"] = [{"value": "1"}]
    with pytest.raises(HttpError) as raised:
        jobs.create(parent=parent, body=nameless_env).execute()
    assert error_of(raised)["status"] == "INVALID_ARGUMENT"
    assert error_of(raised)["details"][0]["fieldViolations"][0]["field"] == (
        "custom_job.job_spec.worker_pool_specs[0].python_package_spec.env[0].name")

    escaping = custom_job("escaping", "--lines", "1", "--out=gs://plain-bucket/../../tmp/escape")
    with pytest.raises(HttpError) as raised:
        jobs.create(parent=parent, body=escaping).execute()
    assert raised.value.resp.status == 400
    assert error_of(raised)["status"] == "INVALID_ARGUMENT"
    assert error_of(raised)["details"][0]["fieldViolations"][0]["field"] == (
        "custom_job.job_spec.worker_pool_specs[0].python_package_spec.args[2]")
    listed = jobs.list(parent=parent, filter='display_name="escaping"').execute()
    assert listed.get("customJobs", []) == []

    unknown = custom_job("unknown")
    unknown["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] = "NVIDIA_TESLA_K81"
    with pytest.raises(HttpError) as raised:
        jobs.create(parent=parent, body=unknown).execute()
    assert error_of(raised)["details"][0]["fieldViolations"][0]["field"] == (
        "custom_job.job_spec.worker_pool_specs[0].machine_spec.accelerator_type")
