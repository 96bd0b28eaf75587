"""`python bench/scripts/sdk_custom_job.py URL PROJECT PACKAGE_URI NAME`: one CustomJob through the
Vertex AI SDK (REST transport) against `aiptrain local serve`, created and waited for to SUCCEEDED.
Exits 1 if it ends otherwise."""

from __future__ import annotations

import sys

from google.cloud import aiplatform
from google.oauth2.credentials import Credentials


def main() -> None:
    url, project, package, name = sys.argv[1:5]
    aiplatform.init(project=project, location="us-central1", api_endpoint=url.rstrip("/"), api_transport="rest",
                    credentials=Credentials(token="bench"), staging_bucket="gs://bench-sdk/staging")
    job = aiplatform.CustomJob(display_name=name, worker_pool_specs=[{
        "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
        "python_package_spec": {"executor_image_uri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11:latest",
                                "package_uris": [package], "python_module": "trainer.task"}}])
    job.run(sync=True)
    if job.state != aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED:
        sys.exit(1)


if __name__ == "__main__":
    main()
