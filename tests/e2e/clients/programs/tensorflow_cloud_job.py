"""What `tfc.run` does once its image is built, unchanged: `deploy_job`, then
`wait_for_aip_training_job_completion`. Usage: python tensorflow_cloud_job.py IMAGE [ARGS...]

Prints one JSON line: {"job_id": ..., "succeeded": ...}.
"""

import json
import sys

from tensorflow_cloud.core import deploy, gcp, machine_config  # type: ignore[import-not-found]
from tensorflow_cloud.utils import google_api_client  # type: ignore[import-not-found]

image, *entry_point_args = sys.argv[1:]
chief = machine_config.COMMON_MACHINE_CONFIGS["CPU"]
job_id = deploy.deploy_job(image, chief, 0, None, entry_point_args, enable_stream_logs=False)
succeeded = google_api_client.wait_for_aip_training_job_completion(job_id, gcp.get_project_name())
print(json.dumps({"job_id": job_id, "succeeded": succeeded}))
