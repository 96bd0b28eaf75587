"""Google's own gcloud, command for command, against `aiptrain local serve`.

One emulator (started with `--gcloud-config`, so that configuration is what gcloud uses), one GCS
emulator for staging, jobs reused across assertions. Each answer is checked against what
aiptrain's own CLI reports for the same job. The last test checks that no request left loopback.
"""

from __future__ import annotations

import base64
import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from aiptrain._emulator.projects import project_number_for
from tests.docs.manual import DOCS, code_block
from tests.e2e.gcloud.harness import (
    EXECUTOR_IMAGE,
    FAST_POLLING,
    PROJECT,
    REGION,
    GcloudSession,
    Result,
    wait_vertex_end,
)
from tests.fixtures.engine import wait_until
from tests.fixtures.timed_run import run_or_explain

pytestmark = [pytest.mark.gcloud, pytest.mark.timeout(900)]

_state: dict[str, Any] = {}


def wait_for(condition: Any) -> Any:
    return wait_until(condition, timeout=180.0, what="gcloud to report it")


def ok(result: Result) -> Result:
    assert result.returncode == 0, str(result)
    return result


def describe(gcloud: GcloudSession, job_id: str) -> dict[str, Any]:
    document: dict[str, Any] = ok(gcloud.run("ai-platform", "jobs", "describe", job_id, "--format", "json")).json()
    return document


def aiptrain_describe(gcloud: GcloudSession, job_id: str) -> dict[str, Any]:
    document: dict[str, Any] = ok(gcloud.aiptrain("jobs", "describe", job_id, "--format", "json")).json()
    return document


def same_job(gcloud_job: dict[str, Any], ours: dict[str, Any]) -> bool:
    """Equal documents; gcloud re-encodes the bytes field `etag` in URL-safe base64, so compare its bytes."""
    def etag_bytes(job: dict[str, Any]) -> bytes:
        return base64.urlsafe_b64decode(str(job.get("etag", "")).replace("+", "-").replace("/", "_"))

    return ({**gcloud_job, "etag": None} == {**ours, "etag": None}) and etag_bytes(gcloud_job) == etag_bytes(ours)


def log_texts(gcloud: GcloudSession, log_filter: str) -> list[str]:
    """`gcloud logging read` (which has no 5 s blind window, unlike stream-logs): the messages."""
    entries = ok(gcloud.run("logging", "read", log_filter, "--format", "json", "--freshness", "1d")).json()
    return [str(entry.get("textPayload", "")) for entry in entries]


def wait_state(gcloud: GcloudSession, job_id: str, states: set[str]) -> dict[str, Any]:
    return dict(wait_for(lambda: (job := describe(gcloud, job_id))["state"] in states and job))


def bucket(gcloud: GcloudSession, name: str = "gcloud-bucket") -> str:
    """A bucket in the GCS emulator gcloud stages into (created over plain HTTP)."""
    request = urllib.request.Request(f"{gcloud.storage_endpoint}/storage/v1/b?project={PROJECT}",
                                     data=json.dumps({"name": name}).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {gcloud.token}"})
    try:
        urllib.request.urlopen(request, timeout=30).close()
    except urllib.error.HTTPError as error:
        if error.code != 409:
            raise
    return f"gs://{name}"


def test_submit_basic_with_stream_logs_update_and_logging_read(gcloud: GcloudSession) -> None:
    staging = bucket(gcloud)
    submitted = ok(gcloud.run(
        "ai-platform", "jobs", "submit", "training", "g_basic", "--package-path", "trainer",
        "--module-name", "trainer.task", "--staging-bucket", staging, "--region", REGION,
        "--runtime-version", "2.11", "--python-version", "3.7", "--labels", "team=ml,stage=ci",
        "--stream-logs", "--", "--x", "0.3", env=FAST_POLLING))
    assert "Job [g_basic] submitted successfully." in submitted.stderr
    assert "\tservice\t\tJob QUEUED." in submitted.stderr
    # gcloud never reads the newest 5 s and may stop before they age, so the trainer's own lines
    # are checked with stream-logs below, once the job is over.
    assert "state: SUCCEEDED" in submitted.stdout

    job = describe(gcloud, "g_basic")
    assert same_job(job, aiptrain_describe(gcloud, "g_basic"))
    assert job["labels"] == {"team": "ml", "stage": "ci"}
    assert job["trainingInput"]["args"] == ["--x", "0.3"]
    package = job["trainingInput"]["packageUris"][0]
    assert package.startswith(f"{staging}/g_basic/") and package.endswith(".tar.gz")
    assert isinstance(job["trainingOutput"]["consumedMLUnits"], float)
    _state["package"] = package

    updated = ok(gcloud.run("ai-platform", "jobs", "update", "g_basic", "--update-labels", "stage=done",
                            "--remove-labels", "team", "--format", "json"))
    assert updated.json()["labels"] == {"stage": "done"}
    assert aiptrain_describe(gcloud, "g_basic")["labels"] == {"stage": "done"}
    assert aiptrain_describe(gcloud, "g_basic")["etag"] != job["etag"]

    # gcloud logging read: newest first (its default order), any filter, --limit.
    newest = ok(gcloud.run("logging", "read", 'resource.labels.job_id="g_basic"', "--format", "json",
                           "--limit", "3")).json()
    assert len(newest) == 3
    stamps = [(e["timestamp"], e["insertId"]) for e in newest]
    assert stamps == sorted(stamps, reverse=True)
    assert newest[0]["textPayload"] == "Job completed successfully."
    errors = ok(gcloud.run("logging", "read", 'resource.type="ml_job" AND severity>=ERROR', "--format", "json")).json()
    assert errors and {e["severity"] for e in errors} == {"ERROR"}
    assert any(e["textPayload"] == "a line on stderr from chief-0" for e in errors)
    theirs = ok(gcloud.run("ai-platform", "jobs", "stream-logs", "g_basic", "--polling-interval", "1"))
    assert "ERROR\t" in theirs.stdout and "\tmaster-replica-0\t\ta line on stderr from chief-0" in theirs.stdout
    ours_lines = ok(gcloud.aiptrain("jobs", "stream-logs", "g_basic"))
    assert "a line on stderr from chief-0" in ours_lines.stdout + ours_lines.stderr


def test_custom_tier_from_config_async_packages_and_stream_logs(gcloud: GcloudSession, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n"
                      "  workerType: n1-standard-4\n  workerCount: 1\n  runtimeVersion: '2.11'\n")
    sync = tmp_path / "sync"
    submitted = ok(gcloud.run(
        "ai-platform", "jobs", "submit", "training", "g_custom", "--packages", _state["package"],
        "--module-name", "trainer.task", "--config", str(config), "--region", REGION, "--async",
        "--", "--sync-dir", str(sync)))
    assert "The --async flag is deprecated" in submitted.stderr
    assert "jobId: g_custom" in submitted.stdout and "state: QUEUED" in submitted.stdout

    streamed = ok(gcloud.run("ai-platform", "jobs", "stream-logs", "g_custom", "--polling-interval", "1"))
    assert "\tservice\t\tJob QUEUED." in streamed.stdout
    worker = log_texts(gcloud, 'resource.labels.job_id="g_custom" AND resource.labels.task_name="worker-replica-0"')
    assert any(text.startswith("task=worker-0 ") for text in worker)
    assert "done chief-0" in log_texts(gcloud, 'resource.labels.job_id="g_custom"')
    job = describe(gcloud, "g_custom")
    assert job["state"] == "SUCCEEDED"
    assert same_job(job, aiptrain_describe(gcloud, "g_custom"))
    assert job["trainingInput"]["workerCount"] == "1"

    listed = ok(gcloud.run("ai-platform", "jobs", "list", "--filter", "state=SUCCEEDED", "--sort-by", "~createTime",
                           "--format", "json")).json()
    ours = ok(gcloud.aiptrain("jobs", "list", "--filter", "state=SUCCEEDED", "--sort-by", "~createTime",
                              "--format", "json")).json()
    assert [j["jobId"] for j in listed][:2] == ["g_custom", "g_basic"]
    assert [j["jobId"] for j in listed] == [j["jobId"] for j in ours]



# The same --filter and --format on both CLIs must print the same bytes (the jobs so far:
# g_basic, labelled by the first test, and g_custom).
SCRIPTS = [
    ("jobs", "list", "--filter", "state=(SUCCEEDED FAILED)", "--sort-by", "jobId", "--format", "value(jobId,state)"),
    ("jobs", "list", "--filter", "jobId:g_* AND NOT jobId:custom", "--format", "value(jobId)"),
    ("jobs", "list", "--filter", "-labels.team:* OR jobId~^g_c", "--sort-by", "jobId", "--format", "value(jobId)"),
    ("jobs", "list", "--filter", "(jobId=G_BASIC OR jobId:cust*) state!=FAILED", "--sort-by", "jobId",
     "--format", "csv(jobId,state,trainingInput.scaleTier)"),
    ("jobs", "list", "--sort-by", "jobId", "--format", "table(jobId,state,trainingInput.region:label=WHERE)"),
    ("jobs", "list", "--sort-by", "jobId", "--format", "table[no-heading](jobId.upper(),labels)"),
    ("jobs", "list", "--sort-by", "jobId", "--format", "yaml(jobId,trainingInput.scaleTier)"),
    ("jobs", "list", "--sort-by", "jobId", "--format", "json(jobId,trainingInput.scaleTier)"),
    ("jobs", "list", "--sort-by", "jobId", "--format", "csv[separator=';',no-heading](jobId,trainingInput.args)"),
    ("jobs", "list", "--filter", "state=RUNNING", "--format", "value(jobId)"),
    ("jobs", "describe", "g_custom", "--format", "value(state,trainingInput.workerCount,trainingInput.masterType)"),
    ("jobs", "describe", "g_custom", "--format", "list(jobId,state)"),
    ("jobs", "list", "--sort-by", "jobId"),
    ("jobs", "list", "--sort-by", "~jobId", "--format", "[no-heading]"),
    ("jobs", "list", "--filter", "createTime>2000-01-01 trainingInput.args:0.3", "--format", "value(jobId,labels)"),
    ("jobs", "list", "--sort-by", "jobId", "--limit", "1", "--format",
     "value[separator=' | '](jobId,createTime.date('%Y'),trainingInput.args.len())"),
    ("jobs", "list", "--filter", "trainingInput.workerCount>=1", "--format",
     "flattened(jobId,trainingInput.workerCount)"),
]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda script: " ".join(script[1:]))
def test_filters_and_formats_print_what_gcloud_prints(gcloud: GcloudSession, script: tuple[str, ...]) -> None:
    theirs = ok(gcloud.run("ai-platform", *script))
    ours = ok(gcloud.aiptrain(*script))
    assert ours.stdout == theirs.stdout


def test_tuning_job(gcloud: GcloudSession, tmp_path: Path) -> None:
    config = tmp_path / "hptuning.yaml"
    config.write_text(json.dumps({"trainingInput": {"runtimeVersion": "2.11", "hyperparameters": {
        "goal": "MAXIMIZE", "hyperparameterMetricTag": "score", "maxTrials": 2, "maxParallelTrials": 2,
        "algorithm": "GRID_SEARCH",
        "params": [{"parameterName": "x", "type": "DISCRETE", "discreteValues": [0.25, 0.75]}]}}}))
    ok(gcloud.run("ai-platform", "jobs", "submit", "training", "g_tuning", "--packages", _state["package"],
                  "--module-name", "trainer.task", "--config", str(config), "--region", REGION,
                  "--stream-logs", env=FAST_POLLING))
    job = describe(gcloud, "g_tuning")
    output = job["trainingOutput"]
    assert job["state"] == "SUCCEEDED" and output["isHyperparameterTuningJob"] is True
    assert output["completedTrialCount"] == "2"
    assert [t["finalMetric"]["objectiveValue"] for t in output["trials"]] == [0.75, 0.25]
    assert same_job(job, aiptrain_describe(gcloud, "g_tuning"))


FLATTENED = [
    ("jobs", "describe", "g_tuning", "--flatten", "trainingOutput.trials", "--format",
     "value(trainingOutput.trials.trialId,trainingOutput.trials.state,trainingOutput.trials.hyperparameters.x)"),
    ("jobs", "list", "--flatten", "trainingOutput.trials", "--filter", "trainingOutput.trials.trialId=2",
     "--format", "table(jobId,trainingOutput.trials.trialId:label=TRIAL)"),
    # (gcloud turns a job without trials into an empty record; aiptrain keeps the job: README.)
    ("jobs", "list", "--flatten", "trainingOutput.trials", "--filter", "jobId:tuning", "--format",
     "csv(jobId,trainingOutput.trials.finalMetric.objectiveValue)"),
]


@pytest.mark.parametrize("script", FLATTENED, ids=lambda script: " ".join(script[1:]))
def test_flatten_prints_what_gcloud_prints(gcloud: GcloudSession, script: tuple[str, ...]) -> None:
    theirs = ok(gcloud.run("ai-platform", *script))
    ours = ok(gcloud.aiptrain(*script))
    assert ours.stdout == theirs.stdout


def test_cancel_duplicates_and_finished_jobs(gcloud: GcloudSession) -> None:
    ok(gcloud.run("ai-platform", "jobs", "submit", "training", "g_sleeper", "--packages", _state["package"],
                  "--module-name", "trainer.task", "--region", REGION, "--runtime-version", "2.11",
                  "--python-version", "3.7", "--", "--sleep", "300", "--ignore-sigterm"))
    started = 'resource.labels.job_id="g_sleeper" AND textPayload:"task="'  # its SIGTERM handler is set
    wait_for(lambda: ok(gcloud.run("logging", "read", started, "--format", "json")).json())
    ok(gcloud.run("ai-platform", "jobs", "cancel", "g_sleeper"))
    # The trainer ignores SIGTERM: the job stays CANCELLING until it is killed, and has no end yet.
    cancelling = describe(gcloud, "g_sleeper")
    assert cancelling["state"] == "CANCELLING" and "endTime" not in cancelling
    cancelled = wait_state(gcloud, "g_sleeper", {"CANCELLED"})
    assert "endTime" in cancelled

    again = gcloud.run("ai-platform", "jobs", "cancel", "g_sleeper")
    assert again.returncode == 1
    assert "FAILED_PRECONDITION" in again.stderr and "terminal state (CANCELLED)" in again.stderr

    duplicate = gcloud.run("ai-platform", "jobs", "submit", "training", "g_basic", "--packages", _state["package"],
                           "--module-name", "trainer.task", "--region", REGION)
    assert duplicate.returncode == 1
    assert "A job with this id already exists." in duplicate.stderr and "job.job_id" in duplicate.stderr

    missing = gcloud.run("ai-platform", "jobs", "update", "g_nobody", "--update-labels", "a=b")
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr and "g_nobody" in missing.stderr


def vertex_id(document: dict[str, Any]) -> str:
    return str(document["name"]).rsplit("/", 1)[1]


def test_vertex_custom_jobs(gcloud: GcloudSession, tmp_path: Path) -> None:
    output = tmp_path / "custom.yaml"
    output.write_text("baseOutputDirectory:\n  outputUriPrefix: gs://gcloud-bucket/vertex/out\n")
    pool = (f"machine-type=n1-standard-4,replica-count=1,executor-image-uri={EXECUTOR_IMAGE},"
            "python-module=trainer.task")
    created = ok(gcloud.run("ai", "custom-jobs", "create", "--display-name", "v_custom",
                            "--python-package-uris", _state["package"], "--worker-pool-spec", pool,
                            "--args=--x=0.5", "--config", str(output), "--labels", "kind=vertex",
                            "--format", "json"))
    job = created.json()
    number = project_number_for(PROJECT)
    assert job["name"].startswith(f"projects/{number}/locations/{REGION}/customJobs/")
    numeric = vertex_id(job)

    wait_vertex_end(gcloud, "custom-jobs", numeric)
    streamed = ok(gcloud.run("ai", "custom-jobs", "stream-logs", numeric, "--polling-interval", "1"))
    assert "Job QUEUED." in streamed.stdout
    # Vertex gives a Python package its output directory in AIP_MODEL_DIR, not as --job-dir.
    trainer = log_texts(gcloud, f'resource.labels.job_id="{numeric}" AND resource.labels.task_name="workerpool0-0"')
    line = next(text for text in trainer if text.startswith("task=chief-0 "))
    assert f"job_dir=None job_id={numeric} " in line and "vertex/out/model" in line
    assert not any("customjob_" in text for text in log_texts(gcloud, f'resource.labels.job_id="{numeric}"'))

    described = ok(gcloud.run("ai", "custom-jobs", "describe", numeric, "--format", "json")).json()
    assert described["state"] == "JOB_STATE_SUCCEEDED" and described["labels"] == {"kind": "vertex"}
    by_number = ok(gcloud.run("ai", "custom-jobs", "describe", job["name"], "--format", "json")).json()
    assert by_number == described
    ours = ok(gcloud.aiptrain("jobs", "describe", "v_custom", "--format", "json", backend="vertex")).json()
    assert ours["state"] == "SUCCEEDED" and ours["labels"] == {"kind": "vertex"}
    assert ours["trainingInput"]["args"] == ["--x=0.5"]

    listed = ok(gcloud.run("ai", "custom-jobs", "list", "--filter", "displayName=v_custom", "--format", "json")).json()
    assert [j["name"] for j in listed] == [job["name"]]
    ml_jobs = ok(gcloud.run("ai-platform", "jobs", "list", "--format", "value(jobId)")).stdout.split()
    assert numeric not in " ".join(ml_jobs) and not any(j.startswith("customjob_") for j in ml_jobs)

    sleeper = ok(gcloud.run("ai", "custom-jobs", "create", "--display-name", "v_sleeper",
                            "--python-package-uris", _state["package"], "--worker-pool-spec", pool,
                            "--args=--sleep=300,--ignore-sigterm", "--format", "json")).json()
    started = f'resource.labels.job_id="{vertex_id(sleeper)}" AND textPayload:"task=chief-0"'
    wait_for(lambda: ok(gcloud.run("logging", "read", started, "--format", "json")).json())
    ok(gcloud.run("ai", "custom-jobs", "cancel", vertex_id(sleeper)))
    cancelling = ok(gcloud.run("ai", "custom-jobs", "describe", vertex_id(sleeper), "--format", "json")).json()
    assert cancelling["state"] == "JOB_STATE_CANCELLING" and "endTime" not in cancelling
    wait_for(lambda: ok(gcloud.run("ai", "custom-jobs", "describe", vertex_id(sleeper), "--format", "json")
                        ).json()["state"] == "JOB_STATE_CANCELLED")
    again = gcloud.run("ai", "custom-jobs", "cancel", vertex_id(sleeper))
    assert again.returncode == 1 and "FAILED_PRECONDITION" in again.stderr
    assert "JOB_STATE_CANCELLED" in again.stderr and "customjob_" not in again.stderr


def test_the_vertex_stream_logs_recipe(gcloud: GcloudSession) -> None:
    """docs/emulator-ci.md's wait-then-stream step, run as written by bash: it waits out a job that
    is still running, then prints the whole log and ends."""
    recipe = code_block(DOCS / "emulator-ci.md", "`gcloud ai custom-jobs stream-logs` and", "sh")
    (gcloud.work / "job.yaml").write_text(json.dumps({"workerPoolSpecs": [{
        "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
        "pythonPackageSpec": {"executorImageUri": EXECUTOR_IMAGE, "packageUris": [_state["package"]],
                              "pythonModule": "trainer.task", "args": ["--sleep=4"]}}]}))
    done = run_or_explain(["bash", "-euo", "pipefail", "-c", recipe], cwd=gcloud.work, env=gcloud.env(),
                          timeout=240, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "Job QUEUED." in done.stdout and done.stdout.rstrip().endswith("Job completed successfully.")


def test_vertex_hp_tuning_jobs(gcloud: GcloudSession, tmp_path: Path) -> None:
    config = tmp_path / "study.yaml"
    config.write_text(json.dumps({
        "studySpec": {"metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
                      "parameters": [{"parameterId": "x", "discreteValueSpec": {"values": [0.2, 0.6]}}],
                      "algorithm": "GRID_SEARCH"},
        "trialJobSpec": {"workerPoolSpecs": [{
            "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
            "pythonPackageSpec": {"executorImageUri": EXECUTOR_IMAGE, "packageUris": [_state["package"]],
                                  "pythonModule": "trainer.task"}}]}}))
    created = ok(gcloud.run("ai", "hp-tuning-jobs", "create", "--display-name", "v_study", "--config", str(config),
                            "--max-trial-count", "2", "--parallel-trial-count", "2", "--format", "json"))
    numeric = vertex_id(created.json())
    assert created.json()["name"].startswith(f"projects/{project_number_for(PROJECT)}/")
    wait_vertex_end(gcloud, "hp-tuning-jobs", numeric)
    streamed = ok(gcloud.run("ai", "hp-tuning-jobs", "stream-logs", numeric, "--polling-interval", "1"))
    assert "Job QUEUED." in streamed.stdout
    assert any(f"job_id={numeric} " in text for text in log_texts(gcloud, f'resource.labels.job_id="{numeric}"'))
    described = ok(gcloud.run("ai", "hp-tuning-jobs", "describe", numeric, "--format", "json")).json()
    assert described["state"] == "JOB_STATE_SUCCEEDED"
    values = sorted(m["value"] for t in described["trials"] for m in t["finalMeasurement"]["metrics"])
    assert values == [0.2, 0.6]
    listed = ok(gcloud.run("ai", "hp-tuning-jobs", "list", "--format", "value(displayName)")).stdout.split()
    assert listed == ["v_study"]
    ours = ok(gcloud.aiptrain("jobs", "describe", "v_study", "--format", "json", backend="vertex")).json()
    assert ours["state"] == "SUCCEEDED"
    finished = gcloud.run("ai", "hp-tuning-jobs", "cancel", numeric)
    assert finished.returncode == 1 and "JOB_STATE_SUCCEEDED" in finished.stderr


def test_auto_packaging_is_refused(gcloud: GcloudSession) -> None:
    # Whatever gcloud does with --local-package-path on this machine (it needs Docker to build an
    # image), no job may appear; the emulator itself refuses the image such a build would name.
    gcloud.run("ai", "custom-jobs", "create", "--display-name", "v_autopackaged", "--worker-pool-spec",
               f"machine-type=n1-standard-4,replica-count=1,executor-image-uri={EXECUTOR_IMAGE},"
               f"local-package-path={gcloud.work},python-module=trainer.task", timeout=120)
    listed = ok(gcloud.run("ai", "custom-jobs", "list", "--filter", "displayName=v_autopackaged",
                           "--format", "value(name)"))
    assert listed.stdout.strip() == ""

    body = {"displayName": "v_autopackaged", "jobSpec": {"workerPoolSpecs": [{
        "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
        "containerSpec": {"imageUri": f"gcr.io/{PROJECT}/cloudai-autogenerated/trainer:20240101.00.00"}}]}}
    request = urllib.request.Request(f"{gcloud.url}v1/projects/{PROJECT}/locations/{REGION}/customJobs",
                                     data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {gcloud.token}"})
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=30)
    error = json.loads(raised.value.read())["error"]
    assert raised.value.code == 400 and error["status"] == "FAILED_PRECONDITION"
    assert "--local-package-path" in error["message"] and "--python-package-uris" in error["message"]


def test_nothing_left_loopback(gcloud: GcloudSession) -> None:
    assert gcloud.proxy.attempts == []
