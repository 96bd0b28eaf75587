"""The `ray` backend: a job runs on a Ray cluster the team owns, through the Ray Jobs API.

One aiptrain job is one Ray job: its submission ID is the job ID, its metadata holds the labels,
the project and the Job resource as submitted. The entrypoint (`aiptrain._backends.ray.driver`)
places one bundle per replica and runs the replicas with the local engine's TF_CONFIG contract,
log prefixes and restart rules; `aiptrain._backends.ray` says how. The trainer packages and the job
description reach the cluster as the Ray job's working_dir, aiptrain itself as a py_module.

What it refuses up front (`unsupported`): custom containers and container commands, Cloud TPUs,
a job without a Python module, and gs:// arguments that cannot be mapped. A hyperparameter tuning
job runs its trials on the cluster; its trainingOutput comes from the driver's output lines.
States: Ray's PENDING is QUEUED; while Ray says
RUNNING, the driver's lines tell QUEUED (waiting for room), PREPARING, RUNNING and CANCELLING
apart; SUCCEEDED, FAILED (errorMessage from the driver) and STOPPED (CANCELLED) map directly.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from aiptrain._backends.base import BackendSettings, DryRunView, RemoteBackendDefaults
from aiptrain._backends.polling import SERVER_PACE
from aiptrain._backends.ray import joblog, plan
from aiptrain._backends.ray.client import LogTail, call, connect, require_ray
from aiptrain._backends.ray.settings import RaySettings, ray_settings
from aiptrain._job import era
from aiptrain._job.logs import LogCursor, LogEntry
from aiptrain._job.spec import Job, JobState, TrainingInput, TrainingOutput
from aiptrain._paths import PACKAGE_DIR, HomeLayout
from aiptrain.errors import JobAlreadyFinished, OperationalError, Problem, UsageError

# Shown by --dry-run in place of the temporary directory created at submit time.
WORKING_DIR_PLACEHOLDER = f"<a new directory holding {plan.PAYLOAD_FILE} and {plan.PACKAGE_STORE_DIR}/>"
_TERMINAL = {"SUCCEEDED": JobState.SUCCEEDED, "FAILED": JobState.FAILED, "STOPPED": JobState.CANCELLED}


def _status(details: Any) -> str:
    """The Ray job's status name (RUNNING, STOPPED, ...)."""
    return str(getattr(details.status, "value", details.status))


def _created(details: Any) -> datetime:
    return datetime.fromtimestamp((details.start_time or 0) / 1000, UTC)


def _rfc3339(millis: int | None) -> str | None:
    if not millis:
        return None
    return datetime.fromtimestamp(millis / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def previous_jobs(job: Job, describe: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """The job resumePreviousJobId names, as `describe` shows it (NotFound if there is none), for
    the driver's study; {} without one."""
    from aiptrain.errors import NotFound

    spec = job.training_input.hyperparameters if job.training_input else None
    previous_id = spec.resume_previous_job_id if spec else None
    if not previous_id:
        return {}
    try:
        return {previous_id: describe(previous_id)}
    except NotFound:
        return {}  # the study fails the job, naming resumePreviousJobId


class RayBackend(RemoteBackendDefaults):
    name: ClassVar[str] = "ray"
    labels_are_fixed: ClassVar[str | None] = (
        "the Ray backend cannot change a job's labels: a Ray job's metadata is fixed when it is submitted")
    default_storage: ClassVar[str] = "local"
    # A follower's polls read the log's new lines from a websocket tail (the first read, and
    # one-off reads, fetch the whole log over HTTP).
    poll_seconds: tuple[float, float] = SERVER_PACE

    def __init__(self, settings: BackendSettings) -> None:
        # Ray is needed once the cluster is: a dry run renders the plan without it.
        self.settings = settings
        self.project = settings.project
        self._ray: RaySettings | None = None
        self._client: Any = None
        self._tails: dict[str, LogTail] = {}
        # Each job's `Ran in` lines as its last read found them: `jobs describe` reads the job, then
        # its notes, and the notes need not read the whole log again.
        self._ran_in: dict[str, list[str] | None] = {}

    # -- settings and connection ----------------------------------------------------------------

    @property
    def ray_settings(self) -> RaySettings:
        if self._ray is None:
            self._ray = ray_settings(self.settings.ray_address, self.settings.ray_resource_scale)
        return self._ray

    @property
    def client(self) -> Any:
        if self._client is None:
            require_ray()  # first: without Ray, the address does not matter yet
            self._client = connect(self.ray_settings.address)
        return self._client

    def _storage_root(self) -> Path:
        return HomeLayout.of(self.settings.home).storage

    # -- submit ---------------------------------------------------------------------------------

    def unsupported(self, job: Job) -> list[Problem]:
        """What Ray cannot run, plus a malformed address or scale (checked without a connection,
        so a dry run needs no cluster; an unreachable one is found when the job is created)."""
        from aiptrain._backends.ray.settings import (
            FIT_CHECK_VARIABLE,
            PACKAGES_VARIABLE,
            fit_check,
            jobs_api_address,
            resource_scale,
            runtime_packages_mode,
        )
        from aiptrain._job.catalog import load_catalog
        from aiptrain.errors import UsageError

        problems = plan.ray_problems(job, load_catalog())
        checks: list[tuple[str, Callable[[], object]]] = [
            ("--ray-resource-scale", lambda: resource_scale(self.settings.ray_resource_scale)),
            (PACKAGES_VARIABLE, runtime_packages_mode), (FIT_CHECK_VARIABLE, fit_check)]
        if self.settings.ray_address:
            checks.append(("--ray-address", lambda: jobs_api_address(self.settings.ray_address)))
        for flag, check in checks:
            try:
                check()
            except UsageError as error:
                problems.append(Problem(flag, error.message, error.hint))
        return problems or self._fit_problems(job)

    def _fit_problems(self, job: Job) -> list[Problem]:
        """A replica larger than every node of the cluster, or images and no node with a container
        engine, found before anything is built or staged.
        Only with a cluster to ask and Ray to ask it with: a dry run needs neither, and a cluster
        that does not answer is met when the job is created."""
        from aiptrain._backends.ray.settings import fit_check, jobs_api_address, resource_scale
        from aiptrain._job.catalog import load_catalog
        from aiptrain._job.cluster import resolve_cluster
        from aiptrain.errors import UsageError

        try:
            address = jobs_api_address(self.settings.ray_address)
            import ray  # noqa: F401 - the state API lives there
        except (UsageError, ImportError):
            return []
        if not fit_check() or job.training_input is None:
            return []
        from aiptrain._backends.ray.client import cluster_nodes
        from aiptrain._backends.ray.node_fit import container_refusal, fit_refusal

        catalog = load_catalog()
        scale = resource_scale(self.settings.ray_resource_scale)
        bundles = plan.bundles_for(resolve_cluster(job.training_input, catalog), catalog, scale)
        nodes = cluster_nodes(address)
        no_engine = container_refusal(bundles, nodes)
        if no_engine is not None:
            return [Problem("trainingInput.masterConfig.imageUri", no_engine.message, no_engine.hint)]
        refusal = fit_refusal(bundles, nodes, scale)
        return [] if refusal is None else [Problem("", refusal.message, refusal.hint)]

    def _document(self, job: Job, working_dir: str, scale: float, project: str | None = None) -> dict[str, Any]:
        from aiptrain._backends.ray.settings import runtime_packages_mode
        from aiptrain._job.catalog import load_catalog
        from aiptrain._job.cluster import resolve_cluster
        from aiptrain._replicas.settings import ReplicaSettings

        catalog = load_catalog()
        assert job.training_input is not None
        groups = resolve_cluster(job.training_input, catalog)
        return plan.ray_job_document(job, project or self.project, groups, catalog, scale=scale,
                                     working_dir=working_dir,
                                     aiptrain_dir=str(PACKAGE_DIR),
                                     packages_mode=runtime_packages_mode(),
                                     kill_grace=ReplicaSettings.from_env().kill_grace)

    @staticmethod
    def _notes(job: Job, scale: float) -> list[str]:
        from aiptrain._backends.ray.settings import runtime_packages_note

        note = runtime_packages_note()
        return plan.notes(job.training_input or TrainingInput(), scale) + ([note] if note else [])

    def request_body(self, job: Job) -> dict[str, Any]:
        """The Ray job as it will be submitted (dry-run needs no cluster, so no address check)."""
        from aiptrain._backends.ray.settings import resource_scale

        scale = resource_scale(self.settings.ray_resource_scale)
        document = self._document(job, WORKING_DIR_PLACEHOLDER, scale)
        document["notes"] = self._notes(job, scale)
        return document

    def dry_run_view(self, job: Job, request_body: dict[str, Any]) -> DryRunView:
        # What the Ray job's log will say first (bundles scaled down, the region unused); how the
        # runtime is honoured on the nodes is the request's `runtimeNotes`.
        from aiptrain._replicas.containers.images import runs_containers

        view = DryRunView(warnings=list(request_body.get("notes", [])))
        if job.training_input is not None and runs_containers(job.training_input):
            from aiptrain._job.catalog import load_catalog
            from aiptrain._job.cluster import resolve_cluster
            from aiptrain._replicas.containers.replica_containers import container_lines

            catalog = load_catalog()
            view.containers = container_lines(job.training_input, resolve_cluster(job.training_input, catalog),
                                              catalog)
        return view

    def create_job(self, job: Job) -> Job:
        job_id = job.job_id or ""
        previous = previous_jobs(job, lambda previous_id: self.get_job(previous_id).to_api())
        self.submit_job(job, submission_id=job_id, project=self.project, previous_jobs=previous)
        return self.get_job(job_id)

    def submit_job(self, job: Job, *, submission_id: str, project: str, vertex_job_id: str | None = None,
                   previous_jobs: dict[str, Any] | None = None) -> None:
        """Submit `job` as the Ray job `submission_id` (AlreadyExists if the cluster has one).

        project: the project it belongs to (its metadata); vertex_job_id: the numeric ID of the
        Vertex AI job it runs (`local serve`'s customJobs), which its replicas then see, as on
        Vertex; previous_jobs: the jobs resumePreviousJobId may name, as describe shows them."""
        from aiptrain._backends.ray.settings import runtime_packages_mode
        from aiptrain._job.catalog import load_catalog
        from aiptrain._job.cluster import resolve_cluster
        from aiptrain._replicas.settings import ReplicaSettings

        client = self.client
        scale = self.ray_settings.resource_scale
        assert job.training_input is not None
        catalog = load_catalog()
        groups = resolve_cluster(job.training_input, catalog)
        with tempfile.TemporaryDirectory(prefix="aiptrain-ray-") as working_dir:
            self._stage_packages(job, Path(working_dir))
            storage_root = os.environ.get("AIPTRAIN_RAY_STORAGE_ROOT") or str(self._storage_root())
            payload = plan.driver_payload(job, project, groups, catalog, scale=scale,
                                          storage_root=storage_root, policy=ReplicaSettings.from_env(),
                                          packages_mode=runtime_packages_mode(), vertex_job_id=vertex_job_id)
            payload["notes"] = self._notes(job, scale)
            # The day each node resolves the trainer's packages as of: the job's label, else this setting.
            payload["runtime"]["resolveAsOf"] = os.environ.get(era.SETTING, "")
            payload["previousJobs"] = previous_jobs or {}
            (Path(working_dir) / plan.PAYLOAD_FILE).write_text(json.dumps(payload, indent=1), encoding="utf-8")
            document = self._document(job, working_dir, scale, project)
            call(submission_id, client.submit_job, entrypoint=document["entrypoint"], submission_id=submission_id,
                 runtime_env=document["runtimeEnv"], metadata=document["metadata"])

    def _stage_packages(self, job: Job, working_dir: Path) -> None:
        """Copy each staged package into the working dir as packages/BUCKET/OBJECT."""
        from aiptrain._environments.preparation import package_path

        assert job.training_input is not None
        store = working_dir / plan.PACKAGE_STORE_DIR
        store.mkdir()
        for uri in job.training_input.package_uris or []:
            source = package_path(uri, self._storage_root())
            if not source.is_file():
                raise OperationalError(f"the package {uri} is not in the local store ({source})",
                                       hint="stage it with --package-path, or keep --storage local with --backend ray")
            target = package_path(uri, store)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)

    # -- read -----------------------------------------------------------------------------------

    def _details(self, job_id: str) -> Any:
        return call(job_id, self.client.get_job_info, job_id)

    def _entries(self, job_id: str, since: datetime, after: LogCursor | None = None, *,
                 ended: bool = False) -> list[LogEntry]:
        """The log's entries after `after`: from this job's tail if one follows it, else read whole.
        Once the job has `ended`, only a tail that has every line answers."""
        tail = self._tails.get(job_id)
        if tail is not None and ended and not tail.done.wait(30):
            tail.failed = True  # incomplete: whole reads from now on, never a gap
        if tail is not None and not tail.failed:
            return tail.entries(after)
        text = call(job_id, self.client.get_job_logs, job_id) or ""
        entries = joblog.parse_log(text, since=since, complete=ended)
        return entries if after is None else [entry for entry in entries if entry.cursor > after]

    def _follow_tail(self, job_id: str, since: datetime) -> None:
        """A follower (a read after a cursor) gets a tail of the job's log (again, if one failed)."""
        tail = self._tails.get(job_id)
        if tail is None or tail.failed:
            self._tails[job_id] = LogTail(self.client, job_id, since)

    def _lifecycle(self, job_id: str, details: Any) -> joblog.Lifecycle | None:
        """What the driver's log says of the job; None before its driver has started."""
        status = _status(details)
        if status != "RUNNING" and status not in _TERMINAL:
            return None
        return joblog.lifecycle(self._entries(job_id, _created(details), ended=status != "RUNNING"))

    def describe_notes(self, job: Job) -> list[str]:
        """A container job's replicas as they ran: each one's image with its id, its container, its node."""
        job_id = job.job_id or ""
        if job_id not in self._ran_in:  # `job` was not read by this backend
            self._job_of(self._details(job_id))
        ran_in = self._ran_in.get(job_id)
        return ["", "Ran in:", *(f"  {line}" for line in ran_in)] if ran_in else []

    def _job_of(self, details: Any) -> Job:
        metadata = details.metadata or {}
        job = Job.model_validate(json.loads(metadata.get(plan.METADATA_JOB, "{}")))
        job.job_id = job.job_id or details.submission_id
        job.create_time = _rfc3339(details.start_time)
        status = _status(details)
        state = _TERMINAL.get(status, JobState.QUEUED)
        # The Ray job's own ID: the job's ID on the command line, another one for `local serve`'s jobs.
        submission_id = details.submission_id or job.job_id or ""
        lifecycle = self._lifecycle(submission_id, details)
        self._ran_in[submission_id] = lifecycle.ran_in if lifecycle is not None else None
        if lifecycle is not None:
            if status == "RUNNING":
                state = lifecycle.state
            if lifecycle.start_time is not None:
                job.start_time = lifecycle.start_time.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            if lifecycle.training_output is not None:
                job.training_output = TrainingOutput.model_validate(lifecycle.training_output)
            if state == JobState.FAILED:
                job.error_message = lifecycle.error_message or details.message or "The Ray job failed."
        job.state = state
        if state.is_terminal:
            job.end_time = _rfc3339(details.end_time)
        return job

    def get_job(self, job_id: str) -> Job:
        return self._job_of(self._details(job_id))

    def list_jobs(self, *, page_size: int = 100, filter: str | None = None) -> Iterator[Job]:
        # Ray's job list has no filter: the caller applies it.
        found = call("*", self.client.list_jobs)
        mine = [d for d in found if (d.metadata or {}).get(plan.METADATA_PROJECT) == self.project
                and d.submission_id]
        for details in sorted(mine, key=lambda d: d.start_time or 0, reverse=True):
            yield self._job_of(details)

    def update_labels(self, job_id: str, labels: dict[str, str], *, etag: str | None = None) -> Job:
        raise UsageError(str(self.labels_are_fixed), hint="labels are set when the job is submitted (--labels)")

    def cancel_job(self, job_id: str) -> None:
        job = self.get_job(job_id)
        if job.state is not None and job.state.is_terminal:
            raise JobAlreadyFinished(f"job {job_id!r} already ended ({job.state.value}); it cannot be cancelled")
        self.stop_job(job_id)

    def stop_job(self, submission_id: str) -> None:
        """Ask the Ray job to stop (its driver stops the replicas on every node, as a cancel does)."""
        call(submission_id, self.client.stop_job, submission_id)

    def forget_log(self, submission_id: str) -> None:
        """Drop what is kept of an ended job's log (its tail): the caller has read all of it."""
        self._tails.pop(submission_id, None)
        self._ran_in.pop(submission_id, None)

    def job_and_new_lines(self, submission_id: str, after: LogCursor | None) -> tuple[Job, list[LogEntry]]:
        """The Ray job as a Job, and its log's entries after `after` (every one once it has ended),
        from one read of its details: what a copier of running jobs (`local serve`) polls."""
        details = self._details(submission_id)
        job = self._job_of(details)
        created = _created(details)
        ended = _status(details) in _TERMINAL
        if not ended:
            self._follow_tail(submission_id, created)
        entries = self._entries(submission_id, created, after, ended=ended)
        return job, [entry for entry in entries if not joblog.is_output_line(entry)]

    def answers(self) -> None:
        """Nothing if the cluster's Jobs API answers; the error that says why not otherwise."""
        call("*", self.client.get_version)

    def read_logs(
        self,
        job_id: str,
        *,
        after: LogCursor | None = None,
        task_name: str | None = None,
        limit: int = 1000,
    ) -> list[LogEntry]:
        details = self._details(job_id)
        created = _created(details)
        ended = _status(details) in _TERMINAL
        if after is not None and not ended:
            self._follow_tail(job_id, created)
        entries = [entry for entry in self._entries(job_id, created, after, ended=ended)
                   if (task_name is None or entry.task_name == task_name) and not joblog.is_output_line(entry)]
        return entries[:limit]
