"""gcloud-style scripts through `--backend mlv1` against `aiptrain local serve`: --format, --filter,
`jobs update` (jobs.patch), "Listed 0 items." on stderr, and the Vertex AI backend's refusal to
change labels. Each command is a subprocess; exit code, stdout and stderr are checked apart.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cli.test_emulator_backends import aiptrain
from tests.fixtures.emulator import Emulator, make_trainer_project, running_emulator, wait_until

PROJECT = "scripts-project"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    with running_emulator(tmp_path_factory.mktemp("scripts-home")) as server:
        trainer = make_trainer_project(tmp_path_factory.mktemp("scripts-trainer"))
        for job_id, labels, code in (("s_ok", "team=nlp", "0"), ("s_fail", "team=vision,env=dev", "3")):
            # The client shares the emulator's home, so `--storage local` stages where the engine reads.
            submitted = aiptrain("jobs", "submit", "training", job_id, *common(server), "--package-path", str(trainer),
                                 "--module-name", "trainer.task", "--region", "us-central1", "--runtime-version",
                                 "2.11", "--staging-bucket", "gs://scripts-local", "--storage", "local",
                                 "--labels", labels, "--", "--exit-code", code, home=server.home)
            assert submitted.returncode == 0, submitted.stderr
        engine = server.engine()
        wait_until(lambda: all(engine.get(PROJECT, j).state.value in ("SUCCEEDED", "FAILED")
                               for j in ("s_ok", "s_fail")))
        yield server


def common(served: Emulator) -> list[str]:
    return ["--backend", "mlv1", "--project", PROJECT, "--api-endpoint", served.url]


def test_formats_and_filters_through_the_rest_backend(served: Emulator) -> None:
    gate = aiptrain("jobs", "describe", "s_fail", *common(served), "--format", "value(state)", home=served.home)
    assert (gate.returncode, gate.stdout, gate.stderr) == (0, "FAILED\n", "")
    listed = aiptrain("jobs", "list", *common(served), "--filter", "state=(FAILED SUCCEEDED)",
                      "--format", "csv(jobId,state,labels.team)", home=served.home)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == "job_id,status,team\ns_fail,FAILED,vision\ns_ok,SUCCEEDED,nlp\n"
    either = aiptrain("--format", "value(jobId)", "jobs", "list", *common(served), "--filter",
                      "NOT labels.env:* OR jobId~fail$", home=served.home)
    assert sorted(either.stdout.split()) == ["s_fail", "s_ok"]
    table = aiptrain("jobs", "list", *common(served), "--filter", "-state=FAILED", "--format",
                     "table(jobId,trainingInput.region)", home=served.home)
    assert table.stdout.splitlines() == ["JOB_ID  REGION", "s_ok    us-central1"]
    nothing = aiptrain("jobs", "list", *common(served), "--filter", "state=RUNNING", home=served.home)
    assert (nothing.returncode, nothing.stdout, nothing.stderr) == (0, "", "Listed 0 items.\n")


def test_the_emulators_jobs_list_takes_the_same_filter_language(served: Emulator) -> None:
    def listed(expression: str) -> tuple[int, dict[str, Any]]:
        query = urllib.parse.urlencode({"filter": expression})
        try:
            asked = urllib.request.Request(f"{served.url}v1/projects/{PROJECT}/jobs?{query}",
                                           headers=served.auth_headers())
            with urllib.request.urlopen(asked, timeout=30) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    status, body = listed("state=(FAILED SUCCEEDED) AND NOT labels.team=nlp")
    assert status == 200 and [job["jobId"] for job in body["jobs"]] == ["s_fail"]
    status, body = listed("jobId~^s_ AND -labels.env:*")
    assert status == 200 and [job["jobId"] for job in body["jobs"]] == ["s_ok"]
    status, body = listed("state=FAILED OR jobId:a AND jobId:b")
    assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"
    assert "parentheses are required" in body["error"]["message"]


def test_update_labels_patches_the_job(served: Emulator) -> None:
    updated = aiptrain("jobs", "update", "s_ok", *common(served), "--update-labels", "stage=prod,team=core",
                       "--format", "json", home=served.home)
    assert updated.returncode == 0, updated.stderr
    assert json.loads(updated.stdout)["labels"] == {"stage": "prod", "team": "core"}
    assert updated.stderr == "Updated job [s_ok].\n"
    removed = aiptrain("jobs", "update", "s_ok", *common(served), "--remove-labels", "stage", "--format", "none",
                       home=served.home)
    assert (removed.returncode, removed.stdout) == (0, "")
    assert served.engine().get(PROJECT, "s_ok").labels == {"team": "core"}
    again = aiptrain("jobs", "update", "s_ok", *common(served), "--remove-labels", "stage", home=served.home)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "No update to perform.\n")
    cleared = aiptrain("jobs", "update", "s_ok", *common(served), "--clear-labels", home=served.home)
    assert cleared.returncode == 0 and served.engine().get(PROJECT, "s_ok").labels is None


def test_vertex_refuses_label_updates_with_exit_2(served: Emulator) -> None:
    refused = aiptrain("jobs", "update", "s_ok", "--backend", "vertex", "--project", PROJECT, "--region",
                       "us-central1", "--api-endpoint", served.url, "--update-labels", "a=b", home=served.home)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert "Vertex AI cannot change a job's labels" in refused.stderr
    assert "hint: labels are set when the job is submitted (--labels)" in refused.stderr


def test_log_http_shows_each_request_on_stderr(served: Emulator) -> None:
    logged = aiptrain("--log-http", "jobs", "describe", "s_fail", *common(served), "--format", "value(state)",
                      home=served.home)
    assert (logged.returncode, logged.stdout) == (0, "FAILED\n")
    assert f"-> GET {served.url}v1/projects/{PROJECT}/jobs/s_fail" in logged.stderr
    assert "<- 200 GET" in logged.stderr
    quiet = aiptrain("jobs", "describe", "s_fail", *common(served), "--format", "value(state)", home=served.home)
    assert quiet.stderr == ""
