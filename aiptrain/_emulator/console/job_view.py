"""Everything the job page shows, read through the engine and the API handlers the emulator serves.

The resource is the one its API returns (`mlv1_api.present_job`, or the Vertex AI handlers'
`present` for a job created as a customJob or hyperparameterTuningJob), so the page's JSON is
what a client of this server gets. The engine adds what no API shows: each replica's processes,
the environment the job ran in and its share of the machine, as `jobs describe` reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiptrain._backends.local.machine_claim import recorded_share
from aiptrain._emulator import mlv1_api, tuning_api, vertex_api
from aiptrain._emulator.console.replicas_view import ReplicaRow, replica_rows, share_lines
from aiptrain._emulator.console.summaries import Curves, SummaryReader, summary_root
from aiptrain._emulator.errors import ApiError
from aiptrain._emulator.services import Services
from aiptrain._emulator.vertex_jobs import TUNING_JOBS
from aiptrain._job.spec import Job, job_resource_name
from aiptrain._replicas.log_capture import SERVICE_TASK


@dataclass(frozen=True)
class JobView:
    project: str
    job: Job
    backend: str  # mlv1 | vertex: the API the job was created through, as the page shows it
    pool_task_names: bool  # created as a Vertex AI job, whose logs name tasks by worker pool
    resource_name: str  # projects/P/jobs/ID, or the Vertex AI job's name
    resource: dict[str, Any]  # as its API returns it
    replicas: list[ReplicaRow]
    share: list[str]  # each replica's part of the machine, per trial slot
    ran_in: list[str]  # what the job ran in (recorded when it was prepared)
    tasks: list[str]  # the task names its log may hold
    summaries: Path | None  # where its training summaries would be
    curves: Curves


def read_job(services: Services, summaries: SummaryReader, project: str, job_id: str) -> JobView:
    """The job's view; NotFound (an AiptrainError) for a job this server does not have."""
    engine = services.engine
    job = engine.get(project, job_id)
    record = engine.store.get(project, job_id)
    numeric_id = record.vertex_job_id
    backend, name, resource = "mlv1", job_resource_name(project, job_id), mlv1_api.present_job(job)
    vertex = services.vertex_job_by_numeric_id(numeric_id) if numeric_id else None
    if vertex is not None:
        backend, name = "vertex", services.vertex_name(vertex)
        try:
            resource = (tuning_api.present(services, vertex) if vertex.collection == TUNING_JOBS
                        else vertex_api.present(services, vertex, job))
        except ApiError:
            pass  # its record cannot be presented: the engine's job is what there is
    share = recorded_share(record.machine_share)
    rows = replica_rows(job, engine.processes(project, job_id), share)
    tasks = sorted({row.task for row in rows} | {SERVICE_TASK})
    root = summary_root(job.training_input.job_dir if job.training_input else None, services.storage_root)
    curves = summaries.curves(root) if root is not None and root.is_dir() else {}
    ran_in = list((record.runtime_environment or {}).get("notes", []))
    return JobView(project, job, backend, vertex is not None, name, resource, rows, share_lines(share), ran_in, tasks,
                   root, curves)
