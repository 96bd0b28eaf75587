"""Google's clients, unchanged and given no endpoint, reach `local serve` through its proxy.

Each client runs in a process whose whole environment is `aiptrain local env --format json`
(plus PATH and HOME): googleapiclient's `discovery.build("ml", "v1")`, google-cloud-storage's
`Client()`, the Vertex AI SDK told only a project and a location (REST and its default gRPC
transport), and gcloud with no configuration and no login.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.manual import DOCS, code_block
from tests.emulator.proxy_clients import client_environment, run_python
from tests.fixtures.emulator import REPO, Emulator, running_emulator

PROJECT = "proxied-project"
PACKAGE = "gs://proxied-bucket/packages/trainer.tar.gz"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, trainer_sdist: Path) -> Iterator[Emulator]:
    with running_emulator(tmp_path_factory.mktemp("proxied-home"), grpc=True) as emulator:
        emulator.stage(trainer_sdist, PACKAGE)
        yield emulator


def test_local_env_names_the_proxy_the_bundle_and_the_credentials(served: Emulator) -> None:
    variables = client_environment(served)
    proxy = variables["HTTPS_PROXY"]
    assert proxy.startswith("http://aiptrain:") and proxy.endswith(f":{variables['CLOUDSDK_PROXY_PORT']}")
    assert variables["https_proxy"] == variables["grpc_proxy"] == proxy
    bundle = Path(variables["REQUESTS_CA_BUNDLE"])
    assert {variables[name] for name in ("SSL_CERT_FILE", "HTTPLIB2_CA_CERTS", "CURL_CA_BUNDLE",
                                         "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE")} \
        == {str(bundle)}
    assert bundle.read_bytes().endswith((served.home / "emulator" / "proxy-ca" / "ca.pem").read_bytes())
    assert Path(variables["CLOUDSDK_AUTH_ACCESS_TOKEN_FILE"]).read_text() == served.token
    assert "127.0.0.1" in variables["NO_PROXY"].split(",")
    # The same variables as shell lines, which a POSIX shell evaluates back to the same values.
    shell = subprocess.run(
        ["sh", "-c", f'eval "$("{sys.executable}" -m aiptrain local env)"; printf %s "$HTTPS_PROXY"'],
        cwd=REPO, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin",
                                                                   "AIPTRAIN_HOME": str(served.home)})
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout == proxy


def test_googleapiclient_discovery_build_without_an_endpoint_creates_and_reads_a_job(served: Emulator) -> None:
    answer = run_python(served, '''
        import json, sys, time
        from googleapiclient import discovery
        jobs = discovery.build("ml", "v1").projects().jobs()
        body = {"jobId": "through_proxy", "trainingInput": {"scaleTier": "BASIC", "region": "us-central1",
                "runtimeVersion": "2.11", "packageUris": [sys.argv[1]], "pythonModule": "trainer.task"}}
        created = jobs.create(parent="projects/%s" % sys.argv[2], body=body).execute()
        for _ in range(300):
            job = jobs.get(name="projects/%s/jobs/through_proxy" % sys.argv[2]).execute()
            if job["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                break
            time.sleep(0.5)
        print(json.dumps({"created": created["jobId"], "state": job["state"]}))
    ''', PACKAGE, PROJECT)
    assert answer == {"created": "through_proxy", "state": "SUCCEEDED"}
    assert served.engine().get(PROJECT, "through_proxy").state.value == "SUCCEEDED"


def test_storage_client_stages_a_package_into_the_local_store(served: Emulator, trainer_sdist: Path) -> None:
    answer = run_python(served, '''
        import json, sys
        from google.cloud import storage
        client = storage.Client()
        client.bucket("staged-by-client").blob("packages/trainer.tar.gz").upload_from_filename(sys.argv[1])
        print(json.dumps([blob.name for blob in client.list_blobs("staged-by-client")]))
    ''', str(trainer_sdist))
    assert answer == ["packages/trainer.tar.gz"]
    assert (served.storage / "staged-by-client" / "packages" / "trainer.tar.gz").read_bytes() == \
        trainer_sdist.read_bytes()


@pytest.mark.parametrize("transport", ["rest", "grpc"])
def test_vertex_sdk_given_only_project_and_location_creates_a_custom_job(served: Emulator, transport: str) -> None:
    """docs/clients/vertex-sdk.md's `aiplatform.init`, as written, on either transport."""
    init = code_block(DOCS / "clients" / "vertex-sdk.md", 'eval "$(aiptrain local env)"', "python")
    assert "api_endpoint" not in init and "credentials" not in init.lower()
    init = init.replace('"my-project"', repr(PROJECT)).replace('"gs://my-bucket/staging"', '"gs://proxied-bucket"')
    if transport == "rest":
        init = init.replace('location="us-central1",', 'location="us-central1", api_transport="rest",')
    answer = run_python(served, init + '''
import json, sys
job = aiplatform.CustomJob(display_name="through-proxy", worker_pool_specs=[{
    "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
    "python_package_spec": {
        "executor_image_uri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest",
        "package_uris": [sys.argv[1]], "python_module": "trainer.task"}}])
job.run(sync=True)
print(json.dumps({"name": job.resource_name, "state": job.state.name,
                  "transport": type(job.api_client._transport).__name__}))
''', PACKAGE)
    assert answer["state"] == "JOB_STATE_SUCCEEDED", answer
    assert answer["transport"].lower().endswith(f"{transport}transport"), answer
    numeric_id = answer["name"].rsplit("/", 1)[1]
    from aiptrain._emulator.services import make_services

    assert make_services(served.engine()).custom_jobs.by_numeric_id(numeric_id) is not None


# -- gcloud, with no configuration and no login ----------------------------------------------------------


@pytest.mark.gcloud
def test_gcloud_submits_an_ml_job_creates_a_custom_job_and_reads_logs(served: Emulator, tmp_path: Path) -> None:
    """docs/clients/gcloud.md's commands, as written, from a shell that has only `aiptrain local env`'s
    environment and an empty gcloud configuration directory: no configuration, no login."""
    if shutil.which("gcloud") is None:
        pytest.skip("gcloud is not on PATH")
    served.stage(served.storage / "proxied-bucket" / "packages" / "trainer.tar.gz",
                 "gs://ci-bucket/packages/trainer-0.1.0.tar.gz")
    (tmp_path / "job.yaml").write_text("""workerPoolSpecs:
  - machineSpec: {machineType: n1-standard-4}
    replicaCount: 1
    pythonPackageSpec:
      executorImageUri: us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest
      packageUris: [gs://ci-bucket/packages/trainer-0.1.0.tar.gz]
      pythonModule: trainer.task
""")
    script = code_block(DOCS / "clients" / "gcloud.md", "# gcloud against", "sh")
    serve_line, eval_line = script.splitlines()[:2]
    assert serve_line.startswith("aiptrain local serve") and eval_line == 'eval "$(aiptrain local env)"'
    script = script.replace(serve_line + "\n", "").replace(
        "aiptrain local env", f"{sys.executable} -m aiptrain local env --port {served.port}")
    script = "set -e\n" + script.replace("gcloud logging read", "sleep 15; gcloud logging read")
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600, env={
        "PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), "AIPTRAIN_HOME": str(served.home),
        "PYTHONPATH": str(REPO), "CLOUDSDK_CONFIG": str(tmp_path / "gcloud-config"),
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    local_project = client_environment(served)["CLOUDSDK_CORE_PROJECT"]
    assert served.engine().get(local_project, "ci_job_1").state.value == "SUCCEEDED"
    assert "job-dir=" in done.stdout  # the trainer's line, read back by `gcloud logging read`
    from aiptrain._emulator.services import make_services

    created = make_services(served.engine()).custom_jobs.list(local_project, "us-central1")
    assert [record.request.get("displayName") for record in created] == ["ci"]
