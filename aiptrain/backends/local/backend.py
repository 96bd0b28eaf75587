"""The `local` backend: jobs run on this machine as real process clusters (aiptrain.replicas).

What it refuses up front (`unsupported`): custom containers and container commands (there is no
container runtime here), Cloud TPUs, a job without a Python module, clusters larger than the
local limit unless AIPTRAIN_LOCAL_REPLICA_CAP asks to shrink them, and trainer arguments with a
gs:// location that cannot map into the local store (`gs://b/../x`). Hyperparameter tuning jobs run
their trials here too (`aiptrain.tuning.job`). GPU requests run on the CPU, with a WARNING line
in the job's log.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from aiptrain.backends.base import BackendSettings
from aiptrain.backends.polling import LOCAL_POLL_SECONDS
from aiptrain.errors import AiptrainError, Problem
from aiptrain.job.logs import LogCursor, LogEntry
from aiptrain.job.spec import Job

if TYPE_CHECKING:
    from aiptrain.backends.local.engine import LocalEngine


class LocalBackend:
    name: ClassVar[str] = "local"
    poll_seconds: ClassVar[tuple[float, float]] = LOCAL_POLL_SECONDS
    default_storage: ClassVar[str] = "local"

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings
        self.project = settings.project
        self._engine: LocalEngine | None = None

    @property
    def engine(self) -> LocalEngine:
        if self._engine is None:
            from aiptrain.backends.local.engine import LocalEngine

            self._engine = LocalEngine(self.settings.home)
        return self._engine

    def unsupported(self, job: Job) -> list[Problem]:
        from aiptrain.job.catalog import load_catalog
        from aiptrain.replicas.cluster_plan import local_problems
        from aiptrain.replicas.settings import LocalSettings

        try:
            local_settings = LocalSettings.from_env()
        except AiptrainError as error:
            return [Problem("environment", error.message, error.hint)]
        problems = local_problems(job, load_catalog(), local_settings) + _arg_problems(job)
        tuning = job.training_input.hyperparameters if job.training_input is not None else None
        if tuning is not None and tuning.resume_previous_job_id:
            # Only then is the store opened: a dry run creates nothing.
            from aiptrain.tuning.job import resume_problems

            problems += resume_problems(self.engine.store, self.project, job)
        return problems

    def request_body(self, job: Job) -> dict[str, Any]:
        return job.to_api()

    def create_job(self, job: Job) -> Job:
        return self.engine.submit(self.project, job)

    def get_job(self, job_id: str) -> Job:
        return self.engine.get(self.project, job_id)

    def list_jobs(self, *, page_size: int = 100) -> Iterator[Job]:
        token: str | None = None
        while True:
            jobs, token = self.engine.list(self.project, page_size=page_size, page_token=token)
            yield from jobs
            if token is None:
                return

    def cancel_job(self, job_id: str) -> None:
        self.engine.cancel(self.project, job_id)

    def read_logs(
        self,
        job_id: str,
        *,
        after: LogCursor | None = None,
        task_name: str | None = None,
        limit: int = 1000,
    ) -> list[LogEntry]:
        return self.engine.logs(self.project, job_id, after=after, task_name=task_name, limit=limit)


def _arg_problems(job: Job) -> list[Problem]:
    """Trainer arguments the engine could not rewrite to local paths when the job starts.

    Without this the job is created and then fails inside its supervisor; refused here it exits
    2 naming the argument, before anything is built or uploaded.
    """
    from aiptrain.replicas.gs_paths import unmappable_args

    args = job.training_input.args if job.training_input is not None else None
    return [Problem(f"trainingInput.args[{index}]", error.message, error.hint)
            for index, error in unmappable_args(args)]
