"""Jobs that arrived as Vertex AI jobs (the emulator's customJobs and hyperparameterTuningJobs
routes) run the way Vertex runs them.

The emulator marks such an engine job with a label holding the Vertex job's numeric ID. Its
replicas get that ID in CLOUD_ML_JOB_ID, and no `--job-dir` argument: Vertex hands the output
directory to a Python package only through AIP_MODEL_DIR, AIP_CHECKPOINT_DIR and
AIP_TENSORBOARD_LOG_DIR, while ml v1 appended `--job-dir` to the trainer's arguments.
"""

from __future__ import annotations

from aiptrain.job.spec import Job

VERTEX_JOB_LABEL = "aiptrain-vertex-job-id"


def vertex_job_id(job: Job) -> str | None:
    """The numeric ID of the Vertex job this engine job runs, or None for an ml v1 job."""
    return (job.labels or {}).get(VERTEX_JOB_LABEL)
