"""The `local` backend: jobs run on this machine as real process clusters (aiptrain.replicas).

What it refuses up front (`unsupported`): custom containers and container commands (there is no
container runtime here), Cloud TPUs, a job without a Python module, clusters larger than the
local limit unless AIPTRAIN_LOCAL_REPLICA_CAP asks to shrink them, and trainer arguments with a
gs:// location that cannot map into the local store (`gs://b/../x`), and more GPUs than this
machine has (when it has any). Hyperparameter tuning jobs run their trials here too
(`aiptrain._tuning.tuning_run`). Replicas get disjoint GPUs by their acceleratorConfig
(`replicas.machine_share`); on a machine without GPUs, GPU requests run on the CPU, with a
WARNING line in the job's log.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar

from aiptrain._backends.base import BackendSettings, DryRunView
from aiptrain._backends.polling import LOCAL_POLL_SECONDS
from aiptrain._job.logs import LogCursor, LogEntry
from aiptrain._job.state import JobState, WaitResult
from aiptrain.errors import AiptrainError, Problem

if TYPE_CHECKING:
    # Annotations only: `jobs wait` runs without the job model (pydantic).
    from aiptrain._backends.local.job_engine import LocalJobEngine
    from aiptrain._job.spec import Job


class LocalBackend:
    name: ClassVar[str] = "local"
    poll_seconds: tuple[float, float] = LOCAL_POLL_SECONDS
    default_storage: ClassVar[str] = "local"
    labels_are_fixed: ClassVar[str | None] = None

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings
        self.project = settings.project
        self._engine: LocalJobEngine | None = None

    @property
    def engine(self) -> LocalJobEngine:
        if self._engine is None:
            from aiptrain._backends.local.job_engine import LocalJobEngine

            with self._store_errors():
                self._engine = LocalJobEngine(self.settings.home)
        return self._engine

    def _store_errors(self) -> AbstractContextManager[None]:
        """The job store's SQLite errors become OperationalErrors that say what to do."""
        from aiptrain._backends.local.store_errors import explained_store_errors
        from aiptrain._paths import aiptrain_home

        return explained_store_errors(self.settings.home or aiptrain_home())

    def unsupported(self, job: Job) -> list[Problem]:
        from aiptrain._job.catalog import load_catalog
        from aiptrain._replicas.cluster_plan import local_problems
        from aiptrain._replicas.settings import ReplicaSettings

        try:
            local_settings = ReplicaSettings.from_env()
        except AiptrainError as error:
            return [Problem("environment", error.message, error.hint)]
        problems = local_problems(job, load_catalog(), local_settings) + _arg_problems(job) + _day_problems()
        tuning = job.training_input.hyperparameters if job.training_input is not None else None
        if tuning is not None and tuning.resume_previous_job_id:
            # Only then is the store opened: a dry run creates nothing.
            from aiptrain._backends.local.job_context import stored_job
            from aiptrain._tuning.tuning_run import resume_problems

            store = self.engine.store
            with self._store_errors():
                problems += resume_problems(lambda job_id: stored_job(store, self.project, job_id), self.project,
                                            job)
        return problems

    def request_body(self, job: Job) -> dict[str, Any]:
        return job.to_api()

    def runtime_environment(self, job_id: str) -> dict[str, Any] | None:
        """What the job ran in (its interpreter under "python"), once it was prepared."""
        with self._store_errors():
            return self.engine.store.get(self.project, job_id).runtime_environment

    def submit_warnings(self, job: Job) -> list[str]:
        return []  # the local runtime notes how it runs the job in the job's first log lines

    def dry_run_view(self, job: Job, request_body: dict[str, Any]) -> DryRunView:
        """The cluster that will really start (after AIPTRAIN_LOCAL_REPLICA_CAP) and the runtime's
        environment on this machine, as the job's first log lines will say it."""
        from aiptrain._job.catalog import load_catalog
        from aiptrain._replicas.cluster_plan import plan_cluster
        from aiptrain._replicas.containers.images import runs_containers
        from aiptrain._replicas.containers.replica_containers import container_addresses, container_lines
        from aiptrain._replicas.settings import ReplicaSettings

        training_input = job.training_input
        assert training_input is not None
        catalog = load_catalog()
        settings = ReplicaSettings.from_env()
        local = plan_cluster(training_input, catalog, settings)
        view = DryRunView(cluster=local.groups, warnings=list(local.warnings))
        if runs_containers(training_input):
            view.containers = container_lines(training_input, local.groups, catalog)
            view.addresses = container_addresses(local.groups)
            return view
        if not training_input.python_module:
            return view  # refused anyway (see `unsupported`)
        if settings.python_override:
            from aiptrain._environments.resolution import resolve_runtime

            version = resolve_runtime(training_input, catalog).version
            view.runtime = [f"Runtime version {version}: runs with AIPTRAIN_LOCAL_PYTHON={settings.python}."]
        else:
            view.runtime, warnings = _runtime_lines(job)
            view.warnings += warnings
        return view

    def describe_notes(self, job: Job) -> list[str]:
        """What the job ran in, as recorded when it was prepared; before that, what it will run in."""
        with self._store_errors():
            record = self.engine.store.get(self.project, job.job_id or "")
        return (_runtime_notes(job, record.runtime_environment, record.runs_containers)
                + _share_notes(record.machine_share) + self._run_limit_notes(record.state))

    def _run_limit_notes(self, state: JobState) -> list[str]:
        """The machine's limit on running jobs, for a job that waits for a slot or holds one."""
        from aiptrain._backends.local.layout import run_limit_line
        from aiptrain._replicas.settings import ReplicaSettings

        if state.is_terminal:
            return []
        default = ReplicaSettings.from_env().max_running
        return ["", f"Run slots: {run_limit_line(self.engine.store.max_running(default))}."]

    def wait_for_job(self, job_id: str, *, timeout: float | None) -> WaitResult:
        """The state read from the job store, without loading the job model."""
        from aiptrain._backends.local.job_wait import wait_for_local_job
        from aiptrain._paths import aiptrain_home

        with self._store_errors():
            return wait_for_local_job(self.settings.home or aiptrain_home(), self.project, job_id, timeout=timeout)

    def create_job(self, job: Job) -> Job:
        with self._store_errors():
            return self.engine.submit(self.project, job)

    def get_job(self, job_id: str) -> Job:
        with self._store_errors():
            return self.engine.get(self.project, job_id)

    def list_jobs(self, *, page_size: int = 100, filter: str | None = None) -> Iterator[Job]:
        token: str | None = None
        while True:
            with self._store_errors():
                jobs, token = self.engine.list(self.project, page_size=page_size, page_token=token, filter=filter)
            yield from jobs
            if token is None:
                return

    def update_labels(self, job_id: str, labels: dict[str, str], *, etag: str | None = None) -> Job:
        with self._store_errors():
            return self.engine.update_labels(self.project, job_id, labels, expected_etag=etag)

    def cancel_job(self, job_id: str) -> None:
        with self._store_errors():
            self.engine.cancel(self.project, job_id)

    def read_logs(
        self,
        job_id: str,
        *,
        after: LogCursor | None = None,
        task_name: str | None = None,
        limit: int = 1000,
    ) -> list[LogEntry]:
        with self._store_errors():
            return self.engine.logs(self.project, job_id, after=after, task_name=task_name, limit=limit)

    def tail_cursor(self, job_id: str, count: int, *, after: LogCursor | None = None,
                    task_name: str | None = None) -> LogCursor | None:
        """Where `--tail count` starts: one seek in the store, not a read of the whole log."""
        with self._store_errors():
            return self.engine.tail_cursor(self.project, job_id, count, after=after, task_name=task_name)


def _runtime_notes(job: Job, recorded: dict[str, Any] | None, runs_containers: bool | None) -> list[str]:
    """What the job ran in, once recorded; before that, the runtime it will run in, unless
    PREPARING recorded that its replicas are containers (their image brings their runtime, which
    their own notes say once they start)."""
    if recorded is not None:
        return ["", "Ran in:", *(f"  {line}" for line in recorded.get("notes", []))]
    if runs_containers:
        return []
    notes, warnings = _runtime_lines(job)
    return ["", *notes, *(f"warning: {warning}" for warning in warnings)] if notes else []


def _share_notes(recorded: dict[str, Any] | None) -> list[str]:
    """Each replica's part of the machine (cores, GPUs), once the job was given one."""
    from aiptrain._backends.local.machine_claim import recorded_share

    share = recorded_share(recorded)
    return ["", "Share of this machine:", *(f"  {line}" for line in share.lines())] if share else []


def _day_problems() -> list[Problem]:
    """A bad AIPTRAIN_RESOLVE_AS_OF, AIPTRAIN_INSTALL_STALL_SECONDS or AIPTRAIN_PYTHON2_MISSING, refused
    at submit (the job's label is checked with the job)."""
    from aiptrain._environments.resolution import python2_may_run_on_python3
    from aiptrain._environments.stall import stall_limit
    from aiptrain._job import era

    try:
        era.check_setting(os.environ)
        stall_limit(os.environ)
        python2_may_run_on_python3(os.environ)
    except AiptrainError as error:
        return [Problem("environment", error.message, error.hint)]
    return []


def _arg_problems(job: Job) -> list[Problem]:
    """Trainer arguments (and a --job-dir) the engine could not map to local paths when the job starts.

    Without this the job is created and then fails inside its supervisor; refused here it exits
    2 naming the argument, before anything is built or uploaded.
    """
    from aiptrain._replicas.gs_paths import unmappable_args

    args = job.training_input.args if job.training_input is not None else None
    job_dir = job.training_input.job_dir if job.training_input is not None else None
    refused = [Problem(f"trainingInput.args[{index}]", error.message, error.hint)
               for index, error in unmappable_args(args)]
    refused += [Problem("trainingInput.jobDir", error.message, error.hint)
                for _, error in unmappable_args([job_dir] if job_dir else [])]
    return refused


def _runtime_lines(job: Job) -> tuple[list[str], list[str]]:
    """(notes, warnings): the environment a local job's runtime version runs in, and why; nothing
    for a job without a Python module or with a runtime version the catalog does not know."""
    from aiptrain._environments.resolution import resolve_runtime
    from aiptrain._job.catalog import load_catalog

    training_input = job.training_input
    catalog = load_catalog()
    if training_input is None or not training_input.python_module:
        return [], []
    if catalog.runtime_for(training_input.runtime_version) is None:
        return [], []
    from aiptrain._environments.for_job import job_day

    resolution = resolve_runtime(training_input, catalog)
    return [*resolution.notes(), job_day(resolution, job.labels, os.environ).line()], resolution.warnings()
