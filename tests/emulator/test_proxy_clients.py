"""Google's clients, unchanged and given no endpoint, reach `local serve` through its proxy.

Each client runs in a process whose whole environment is `aiptrain local env --format json`
(plus PATH and HOME): googleapiclient's `discovery.build("ml", "v1")`, google-cloud-storage's
`Client()`, the Vertex AI SDK told only a project and a location (REST and its default gRPC
transport), and gcloud with no configuration and no login.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.emulator.proxy_clients import bare_environment, client_environment, run_python
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
    answer = run_python(served, '''
        import json, sys
        from google.cloud import aiplatform
        transport = sys.argv[3]
        aiplatform.init(project=sys.argv[2], location="us-central1", staging_bucket="gs://proxied-bucket",
                        **({"api_transport": "rest"} if transport == "rest" else {}))
        job = aiplatform.CustomJob(display_name="through-proxy-" + transport, worker_pool_specs=[{
            "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
            "python_package_spec": {
                "executor_image_uri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest",
                "package_uris": [sys.argv[1]], "python_module": "trainer.task"}}])
        job.run(sync=True)
        print(json.dumps({"name": job.resource_name, "state": job.state.name,
                          "transport": type(job.api_client._transport).__name__}))
    ''', PACKAGE, PROJECT, transport)
    assert answer["state"] == "JOB_STATE_SUCCEEDED", answer
    assert answer["transport"].lower().endswith(f"{transport}transport"), answer
    numeric_id = answer["name"].rsplit("/", 1)[1]
    from aiptrain.emulator.services import make_services

    assert make_services(served.engine()).custom_jobs.by_numeric_id(numeric_id) is not None


# -- gcloud, with no configuration and no login ----------------------------------------------------------


def gcloud(served: Emulator, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["gcloud", *args], capture_output=True, text=True, timeout=300,
                          env=bare_environment(served, CLOUDSDK_CONFIG=str(config)))


@pytest.mark.gcloud
def test_gcloud_submits_an_ml_job_creates_a_custom_job_and_reads_logs(served: Emulator, tmp_path: Path) -> None:
    if shutil.which("gcloud") is None:
        pytest.skip("gcloud is not on PATH")
    config = tmp_path / "gcloud-config"  # empty: no configuration, no account
    submitted = gcloud(served, config, "ai-platform", "jobs", "submit", "training", "gcloud_through_proxy",
                       "--region", "us-central1", "--module-name", "trainer.task", "--packages", PACKAGE,
                       "--runtime-version", "2.11", "--python-version", "3.7")
    assert submitted.returncode == 0, submitted.stderr
    spec = tmp_path / "custom-job.yaml"
    spec.write_text(f"""workerPoolSpecs:
  - machineSpec: {{machineType: n1-standard-4}}
    replicaCount: 1
    pythonPackageSpec:
      executorImageUri: us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest
      packageUris: [{PACKAGE}]
      pythonModule: trainer.task
""")
    created = gcloud(served, config, "ai", "custom-jobs", "create", "--region", "us-central1",
                     "--display-name", "gcloud-through-proxy", "--config", str(spec), "--format", "value(name)")
    assert created.returncode == 0, created.stderr
    assert "/customJobs/" in created.stdout
    from tests.fixtures.engine import wait_until

    engine = served.engine()
    local_project = client_environment(served)["CLOUDSDK_CORE_PROJECT"]
    wait_until(lambda: engine.get(local_project, "gcloud_through_proxy").state.value == "SUCCEEDED", timeout=180)
    logs = gcloud(served, config, "logging", "read",
                  'resource.type="ml_job" AND resource.labels.job_id="gcloud_through_proxy"',
                  "--format", "value(textPayload)", "--freshness", "1d")
    assert logs.returncode == 0, logs.stderr
    assert "job-dir=" in logs.stdout
