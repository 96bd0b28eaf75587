"""The Backend protocol: what every place a job can run (local, ray, vertex, mlv1) must offer.

Backends receive a validated `Job` and speak in `Job`s, whatever their wire format, so every
command works the same on every backend. Each backend says what it cannot do (`unsupported`),
and the submit path refuses such a job before anything is built or uploaded.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from aiptrain._job.logs import LogCursor, LogEntry
from aiptrain._job.state import WaitResult
from aiptrain.errors import Problem

if TYPE_CHECKING:
    # Annotations only: `jobs wait` on the local backend runs without the job model (pydantic).
    from aiptrain._job.cluster import ReplicaGroup
    from aiptrain._job.spec import Job


@dataclass(frozen=True)
class RequestOptions:
    """gcloud's global flags that change the REST requests a backend sends."""

    billing_project: str | None = None  # --billing-project: the X-Goog-User-Project header
    trace_token: str | None = None  # --trace-token: `trace=token:TOKEN` on every request
    impersonate_service_account: str | None = None  # --impersonate-service-account: act as it


@dataclass(frozen=True)
class BackendSettings:
    """What the CLI knows that a backend may need."""

    project: str
    region: str | None = None
    home: Path | None = None
    api_endpoint: str | None = None
    verbosity: int = 0
    # The ray backend: the Jobs API address (--ray-address) and the bundle scale (--ray-resource-scale).
    ray_address: str | None = None
    ray_resource_scale: float | None = None
    request_options: RequestOptions = field(default_factory=RequestOptions)


@dataclass
class DryRunView:
    """What only the backend can add to a dry run: how it would really run the job."""

    # The cluster that would really start, where it differs from the request (a replica cap).
    cluster: list[ReplicaGroup] | None = None
    warnings: list[str] = field(default_factory=list)
    # How the runtime version is honoured, in the words of the job's first log lines.
    runtime: list[str] = field(default_factory=list)
    # Each replica's container (`task: IMAGE ARGS [limits]`), for a job whose replicas are containers.
    containers: list[str] = field(default_factory=list)
    # The replicas' addresses (TF_CONFIG task type -> host:port) where they are known before the
    # job starts (containers: each its own host); None shows placeholders.
    addresses: dict[str, list[str]] | None = None


class Backend(Protocol):
    # The registry name (`--backend NAME`).
    name: ClassVar[str]
    # Where this backend's packages are staged by default: "local" or "gcs".
    default_storage: ClassVar[str]
    # (fast, ceiling) seconds between two polls of a follower: quick for a local store, gentler
    # for a REST service with quotas.
    poll_seconds: tuple[float, float]
    # Why this backend cannot change a job's labels (`jobs update` is refused before anything is
    # read), or None where it can.
    labels_are_fixed: ClassVar[str | None]

    # Problems with a job this backend cannot run (custom containers locally, ...); [] if none.
    def unsupported(self, job: Job) -> list[Problem]: ...

    # The exact body `create_job` would send, for --dry-run.
    def request_body(self, job: Job) -> dict[str, Any]: ...

    # Create the job; returns it as the backend reports it (state QUEUED or later).
    def create_job(self, job: Job) -> Job: ...

    def get_job(self, job_id: str) -> Job: ...

    # The project's jobs, newest first where the backend can sort. `filter` (gcloud's filter
    # language, already parsed once by the caller) may narrow the listing where the backend's
    # server can; the caller applies the whole filter to what comes back, so a backend may ignore it.
    def list_jobs(self, *, page_size: int = 100, filter: str | None = None) -> Iterator[Job]: ...

    def cancel_job(self, job_id: str) -> None: ...

    # Replace the job's labels (`jobs update`); `etag`, when given, must still be the job's (else
    # EtagMismatch: someone changed it since it was read). Where `labels_are_fixed`, UsageError.
    def update_labels(self, job_id: str, labels: dict[str, str], *, etag: str | None = None) -> Job: ...

    # Log entries after `after` in (timestamp, insert_id) order, at most `limit`.
    def read_logs(
        self,
        job_id: str,
        *,
        after: LogCursor | None = None,
        task_name: str | None = None,
        limit: int = 1000,
    ) -> list[LogEntry]: ...

    # What the dry run adds to the request body (the cluster, warnings, the runtime's environment).
    def dry_run_view(self, job: Job, request_body: dict[str, Any]) -> DryRunView: ...

    # Lines `jobs describe` adds after the resource (how the runtime version ran); [] if none.
    def describe_notes(self, job: Job) -> list[str]: ...

    # A wait cheaper than following the job's log and state, or None to follow it.
    def wait_for_job(self, job_id: str, *, timeout: float | None) -> WaitResult | None: ...

    # What a submit tells the user about how this backend runs the job (e.g. another Python); [] if nothing.
    def submit_warnings(self, job: Job) -> list[str]: ...

    # The cursor the last `count` entries after `after` follow (`after` when there are fewer):
    # where `--tail count` starts. The local store seeks there; others read the log through.
    def tail_cursor(self, job_id: str, count: int, *, after: LogCursor | None = None,
                    task_name: str | None = None) -> LogCursor | None: ...

    # What the job ran in (its interpreter under "python") where the backend recorded it once the
    # job was prepared (the local backend); None elsewhere.
    def runtime_environment(self, job_id: str) -> dict[str, Any] | None: ...


# How many entries one read of a log returns while a follower reads it through.
LOG_PAGE = 1000


def read_through_tail(backend: Backend, job_id: str, count: int, *, after: LogCursor | None = None,
                      task_name: str | None = None) -> LogCursor | None:
    """`Backend.tail_cursor` for a backend that cannot seek: the log read through once."""
    recent: deque[LogCursor] = deque(maxlen=count + 1)
    cursor = after
    while True:
        entries = backend.read_logs(job_id, after=cursor, task_name=task_name, limit=LOG_PAGE)
        recent.extend(entry.cursor for entry in entries)
        if entries:
            cursor = entries[-1].cursor
        if len(entries) < LOG_PAGE:
            break
    if len(recent) <= count:
        return after  # fewer entries than asked for: all of them
    return recent[0]


class RemoteBackendDefaults:
    """The answers of a backend that knows no more of a job than its REST resource."""

    def dry_run_view(self, job: Job, request_body: dict[str, Any]) -> DryRunView:
        return DryRunView()

    def describe_notes(self, job: Job) -> list[str]:
        return []

    def wait_for_job(self, job_id: str, *, timeout: float | None) -> WaitResult | None:
        return None

    def submit_warnings(self, job: Job) -> list[str]:
        return []

    def tail_cursor(self: Backend, job_id: str, count: int, *, after: LogCursor | None = None,
                    task_name: str | None = None) -> LogCursor | None:
        return read_through_tail(self, job_id, count, after=after, task_name=task_name)

    def runtime_environment(self, job_id: str) -> dict[str, Any] | None:
        return None
