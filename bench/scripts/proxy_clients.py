"""`python bench/scripts/proxy_clients.py CLIENT ENDPOINT PROJECT PACKAGE_URI NAME`: one job, create to
SUCCEEDED, by Google's client as shipped. ENDPOINT `proxy`: no endpoint is given, the environment
(`aiptrain local env`) leads the client to `local serve`; else the client is given that endpoint.
Credentials come from GOOGLE_APPLICATION_CREDENTIALS either way. CLIENT `vertex`: a Vertex AI SDK
CustomJob (REST), waited for with `run(sync=True)`; `ml`: googleapiclient ml v1 `jobs.create`, then
`jobs.get` every 0.5 s. Exits 1 if the job ends otherwise."""

from __future__ import annotations

import sys
import time


def vertex(endpoint: str | None, project: str, package: str, name: str) -> bool:
    from google.cloud import aiplatform

    aiplatform.init(project=project, location="us-central1", api_transport="rest",
                    staging_bucket="gs://bench-proxy/staging",
                    **({"api_endpoint": endpoint.rstrip("/")} if endpoint else {}))
    job = aiplatform.CustomJob(display_name=name, worker_pool_specs=[{
        "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
        "python_package_spec": {"executor_image_uri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11:latest",
                                "package_uris": [package], "python_module": "trainer.task"}}])
    job.run(sync=True)
    return bool(job.state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED)


def ml(endpoint: str | None, project: str, package: str, name: str) -> bool:
    from googleapiclient import discovery

    options = {"client_options": {"api_endpoint": endpoint}} if endpoint else {}
    jobs = discovery.build("ml", "v1", cache_discovery=False, **options).projects().jobs()
    jobs.create(parent=f"projects/{project}", body={"jobId": name, "trainingInput": {
        "scaleTier": "BASIC", "region": "us-central1", "runtimeVersion": "2.11", "packageUris": [package],
        "pythonModule": "trainer.task"}}).execute()
    while True:
        state = jobs.get(name=f"projects/{project}/jobs/{name}").execute()["state"]
        if state in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return bool(state == "SUCCEEDED")
        time.sleep(0.5)


def main() -> None:
    client, endpoint, project, package, name = sys.argv[1:6]
    run = vertex if client == "vertex" else ml
    if not run(None if endpoint == "proxy" else endpoint, project, package, name):
        sys.exit(1)


if __name__ == "__main__":
    main()
