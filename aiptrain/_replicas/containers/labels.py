"""The labels of everything aiptrain creates on a container engine (light: the reaper imports it
without the job model)."""

from __future__ import annotations

# Labels of everything aiptrain creates: the job (its run token), the replica set, the task.
JOB_LABEL = "aiptrain.job"
RUN_LABEL = "aiptrain.run"
TASK_LABEL = "aiptrain.task"
KIND_LABEL = "aiptrain.kind"  # replica | network-owner


def labels(job_token: str, run_token: str, task_name: str | None = None, kind: str | None = None) -> list[str]:
    """`--label` options naming the job and the set (what the reaper and the end of the set remove)."""
    pairs = {JOB_LABEL: job_token, RUN_LABEL: run_token}
    if task_name:
        pairs[TASK_LABEL] = task_name
    if kind:
        pairs[KIND_LABEL] = kind
    return [option for key, value in pairs.items() for option in ("--label", f"{key}={value}")]
