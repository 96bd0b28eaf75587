"""The REST job body through a real `aiptrain local serve`: whatever a client sends, the answer is a
4xx in Google's error shape or a job the CLI would also accept, never a 500, and never a cluster
of more processes than the local replica cap.

Accepted jobs are cancelled at once; their package is not an installable archive, so one that
starts before the cancel fails at its install and runs no trainer.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import parse_job
from aiptrain._job.validate import validate_job
from aiptrain._paths import serve_token_path
from aiptrain._replicas.cluster_plan import local_problems, plan_cluster, total_replicas
from aiptrain._replicas.settings import DEFAULT_MAX_REPLICAS, ReplicaSettings
from aiptrain.errors import AiptrainError

PROJECT = "fuzz-project"
PACKAGE = "gs://fuzz-bucket/packages/trainer-0.1.tar.gz"
# `make test` runs the ci profile: a few dozen bodies; `make fuzz` as many as its profile says.
_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
EXAMPLES = 30 if _PROFILE == "ci" else settings.get_profile(_PROFILE).max_examples

machine_types = st.sampled_from(["n1-standard-4", "n1-highmem-8", "complex_model_m", "standard", "n1-bogus-1",
                                 "", "N1-STANDARD-4"])
counts = (st.integers(min_value=-5, max_value=40).map(str) | st.sampled_from(["1000000", "-3", "9" * 30, "", "1.5",
                                                                              "0x10", " 2"])
          | st.integers(min_value=-3, max_value=20))
labels = st.dictionaries(st.text(alphabet="abcXY_-09é ", min_size=0, max_size=12),
                         st.text(alphabet="abc09_-Z ", max_size=12), max_size=70)
training_input = st.fixed_dictionaries(
    {"region": st.sampled_from(["us-central1", "europe-west1", "mars-north1"]),
     "pythonModule": st.sampled_from(["trainer.task", "timeit", "", "trainer..task"])},
    optional={
        "scaleTier": st.sampled_from(["BASIC", "STANDARD_1", "PREMIUM_1", "CUSTOM", "BASIC_GPU", "BASIC_TPU",
                                      "NOPE"]),
        "masterType": machine_types, "workerType": machine_types, "parameterServerType": machine_types,
        "evaluatorType": machine_types,
        "workerCount": counts, "parameterServerCount": counts, "evaluatorCount": counts,
        "packageUris": st.lists(st.sampled_from([PACKAGE, "gs://fuzz-bucket/missing.tar.gz", "gs://fuzz-bucket/../x",
                                                 "/etc/passwd", "gs://b/p.tar.gz"]), max_size=3),
        "runtimeVersion": st.sampled_from(["2.11", "1.15", "0.9", "latest"]),
        "args": st.lists(st.text(max_size=20), max_size=4),
        "jobDir": st.sampled_from(["gs://fuzz-bucket/out", "gs://fuzz-bucket/../etc", "file:///tmp"]),
    })
job_ids = st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True) | st.sampled_from(["", "1job", "a-b", "x" * 200])
wild = st.fixed_dictionaries({"jobId": job_ids, "trainingInput": training_input}, optional={"labels": labels})
# Close to a job that runs, so that acceptance is explored too: only sizes, counts and labels vary.
valid_machines = st.sampled_from(["n1-standard-4", "n1-standard-8", "n1-highmem-8", "complex_model_m"])
plausible = st.fixed_dictionaries({
    "jobId": st.from_regex(r"[a-z][a-z0-9_]{3,20}", fullmatch=True),
    "trainingInput": st.fixed_dictionaries(
        {"region": st.just("us-central1"), "pythonModule": st.just("trainer.task"), "packageUris": st.just([PACKAGE]),
         "runtimeVersion": st.just("2.11"), "scaleTier": st.sampled_from(["BASIC", "STANDARD_1", "CUSTOM"])},
        optional={"masterType": valid_machines, "workerType": valid_machines, "parameterServerType": valid_machines,
                  "workerCount": counts, "parameterServerCount": counts, "evaluatorType": valid_machines,
                  "evaluatorCount": counts}),
}, optional={"labels": st.dictionaries(st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True),
                                       st.from_regex(r"[a-z0-9_-]{0,10}", fullmatch=True), max_size=70)})
bodies = wild | plausible


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str, Path]]:
    home = tmp_path_factory.mktemp("fuzz-home")
    package = home / "storage" / PACKAGE.removeprefix("gs://")
    package.parent.mkdir(parents=True)
    package.write_bytes(b"not an archive: an accepted job fails at its install")
    env = {key: value for key, value in os.environ.items() if not key.startswith("AIPTRAIN_LOCAL_REPLICA_CAP")}
    env["AIPTRAIN_HOME"] = str(home)
    process = subprocess.Popen([sys.executable, "-m", "aiptrain", "local", "serve", "--port", "0"], env=env,
                               stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    first = process.stderr.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", first)
    assert found, first
    port = int(found.group(1))
    yield port, serve_token_path(port, home).read_text(), home
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
    cancel_all(home)


def cancel_all(home: Path) -> None:
    from aiptrain._backends.local.job_engine import LocalJobEngine

    engine = LocalJobEngine(home)
    for record in engine.store.active_jobs():
        try:
            engine.cancel(record.project, record.job_id)
        except AiptrainError:
            pass


def post(port: int, token: str, path: str, body: Any) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("POST", path, body=json.dumps(body), headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        connection.close()


def the_cli_accepts(body: dict[str, Any]) -> tuple[bool, int]:
    """Whether `jobs submit training` would take this job on the local backend, and its process count."""
    catalog = load_catalog()
    try:
        job = parse_job(body)
    except (AiptrainError, ValueError):
        return False, 0
    if validate_job(job, catalog) or local_problems(job, catalog, ReplicaSettings.from_env()):
        return False, 0
    assert job.training_input is not None
    return True, total_replicas(plan_cluster(job.training_input, catalog, ReplicaSettings.from_env()).groups)


@settings(max_examples=EXAMPLES)
@given(body=bodies)
def test_a_job_body_is_refused_or_is_one_the_cli_accepts(server: tuple[int, str, Path], body: dict[str, Any]) -> None:
    port, token, _home = server
    status, answer = post(port, token, f"/v1/projects/{PROJECT}/jobs", body)
    assert status != 500 and status < 500, answer
    event(f"HTTP {status}")
    if status == 200:
        accepted, processes = the_cli_accepts(body)
        assert accepted, (body, answer)
        assert processes <= DEFAULT_MAX_REPLICAS
        cancel = post(port, token, f"/v1/projects/{PROJECT}/jobs/{answer['jobId']}:cancel", {})
        assert cancel[0] in (200, 400), cancel  # 400: it already failed at its install
    else:
        assert 400 <= status < 500, answer
        error = answer["error"]
        assert error["code"] == status and error["status"] and error["message"]


def test_a_plain_job_is_accepted(server: tuple[int, str, Path]) -> None:
    """The control: the server is not refusing everything."""
    port, token, _home = server
    body = {"jobId": "plain_control", "trainingInput": {"region": "us-central1", "pythonModule": "trainer.task",
                                                        "packageUris": [PACKAGE], "scaleTier": "STANDARD_1"}}
    status, answer = post(port, token, f"/v1/projects/{PROJECT}/jobs", body)
    assert status == 200, answer
    assert the_cli_accepts(body) == (True, total_replicas(plan_cluster(
        parse_job(body).training_input, load_catalog(), ReplicaSettings.from_env()).groups))  # type: ignore[arg-type]
    post(port, token, f"/v1/projects/{PROJECT}/jobs/plain_control:cancel", {})
