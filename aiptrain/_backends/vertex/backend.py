"""The `vertex` backend: the job runs as a Vertex AI CustomJob, and is shown as an ml v1 Job.

A job with `hyperparameters` runs as a HyperparameterTuningJob instead (`vertex.study`), shown
as an ml v1 tuning job with `trainingOutput.trials`. The job ID becomes the display name. Vertex
allows several jobs with one display name, but an aiptrain job ID names one job, so `create_job`
refuses (AlreadyExists, exit 1) when a CustomJob or a HyperparameterTuningJob of that display
name exists in the project and region, whatever its state: the alternative, silently picking one
of several, would make describe/cancel/stream-logs ambiguous. Lookups search both collections
and use the newest job with that display name.

Logs come from Cloud Logging: Vertex writes them under `resource.type="ml_job"` with the numeric
job ID as `job_id` (a tuning job's trials under its ID, with `trial_id`), and task names
`workerpool<N>-<I>`, which are shown as the ml v1 names (`master-replica-0`, `worker-replica-1`,
...). `--task-name` accepts either form.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator
from typing import Any, ClassVar

from aiptrain._backends.base import BackendSettings, DryRunView, RemoteBackendDefaults
from aiptrain._backends.mlv1 import logs as _logs
from aiptrain._backends.mlv1.backend import logging_endpoint
from aiptrain._backends.mlv1.client import ENDPOINT_ENV, call, resolve_endpoint
from aiptrain._backends.polling import GOOGLE_PACE, pace_for
from aiptrain._backends.vertex.study import hyperparameter_tuning_job_to_job, is_tuning_job, vertex_request_body
from aiptrain._backends.vertex.translate import custom_job_to_job, python_change_warning, vertex_problems
from aiptrain._job.catalog import Catalog, load_catalog
from aiptrain._job.logs import LogCursor, LogEntry
from aiptrain._job.spec import Job
from aiptrain._job.task_names import ml_task_name, vertex_task_name
from aiptrain.errors import AlreadyExists, NotFound, Problem, UsageError

VERTEX_LOG_RESOURCE = 'resource.type="ml_job"'
CUSTOM_JOBS = "customJobs"
TUNING_JOBS = "hyperparameterTuningJobs"
# The REST collections a job may live in; each list response holds its jobs under that name.
_COLLECTIONS = (CUSTOM_JOBS, TUNING_JOBS)


def collection_of(resource_name: str) -> str:
    """`projects/P/locations/L/hyperparameterTuningJobs/N` -> `hyperparameterTuningJobs`."""
    parts = resource_name.split("/")
    return parts[-2] if len(parts) >= 2 and parts[-2] in _COLLECTIONS else CUSTOM_JOBS


def default_endpoint(region: str) -> str:
    return f"https://{region}-aiplatform.googleapis.com/"


class VertexBackend(RemoteBackendDefaults):
    name: ClassVar[str] = "vertex"
    labels_are_fixed: ClassVar[str | None] = (
        "Vertex AI cannot change a job's labels: its customJobs and hyperparameterTuningJobs have no update method")
    poll_seconds: tuple[float, float] = GOOGLE_PACE
    default_storage: ClassVar[str] = "gcs"

    def __init__(self, settings: BackendSettings, catalog: Catalog | None = None) -> None:
        self.settings = settings
        self.project = settings.project
        self.region = settings.region
        # Before the region is known: an endpoint given is what decides the pace, Google's by default.
        self.poll_seconds = pace_for(settings.api_endpoint or os.environ.get(ENDPOINT_ENV))
        self.catalog = catalog or load_catalog()
        self._client: Any = None
        self._logging: Any = None
        # display name -> resource name of its job (names never change once created).
        self._names: dict[str, str] = {}

    # -- clients ---------------------------------------------------------------------------

    def _require_region(self) -> str:
        if not self.region:
            raise UsageError("the vertex backend needs a region",
                             hint="pass --region (e.g. us-central1) or set compute/region")
        return self.region

    @property
    def endpoint(self) -> str:
        return resolve_endpoint(self.settings.api_endpoint, default_endpoint(self._require_region()))

    def _jobs(self, collection: str) -> Any:
        """The REST resource of `customJobs` or `hyperparameterTuningJobs`."""
        if self._client is None:
            from aiptrain._backends.mlv1.client import build_client

            self._client = build_client("aiplatform", "v1", self.endpoint, self.settings.request_options)
        locations = self._client.projects().locations()
        return locations.hyperparameterTuningJobs() if collection == TUNING_JOBS else locations.customJobs()

    @property
    def _entries(self) -> Any:
        if self._logging is None:
            from aiptrain._backends.mlv1.client import build_client

            self._logging = build_client("logging", "v2", logging_endpoint(self.settings.api_endpoint, self.endpoint),
                                         self.settings.request_options)
        return self._logging

    @property
    def _parent(self) -> str:
        return f"projects/{self.project}/locations/{self._require_region()}"

    # -- Backend ---------------------------------------------------------------------------

    def unsupported(self, job: Job) -> list[Problem]:
        return vertex_problems(job, self.catalog)

    def request_body(self, job: Job) -> dict[str, Any]:
        return vertex_request_body(job, self.catalog)

    def dry_run_view(self, job: Job, request_body: dict[str, Any]) -> DryRunView:
        return DryRunView(warnings=self.submit_warnings(job))  # what the submit would warn of

    def submit_warnings(self, job: Job) -> list[str]:
        warning = python_change_warning(job, self.catalog)
        return [warning] if warning else []

    def _as_job(self, resource: dict[str, Any]) -> Job:
        if collection_of(str(resource.get("name") or "")) == TUNING_JOBS:
            return hyperparameter_tuning_job_to_job(resource, self.catalog)
        return custom_job_to_job(resource, self.catalog)

    def create_job(self, job: Job) -> Job:
        if not self.region and job.training_input is not None:
            # The job's own region (from --config) decides where it is created.
            self.region = job.training_input.region
        body = self.request_body(job)
        job_id = body["displayName"]
        existing = self._find(job_id)
        if existing is not None:
            raise AlreadyExists(
                f"a Vertex AI job named {job_id} already exists in {self._parent} ({existing.get('name')})",
                hint="job IDs name one job: choose another job ID",
            )
        collection = TUNING_JOBS if is_tuning_job(job) else CUSTOM_JOBS
        created = call(self._jobs(collection).create(parent=self._parent, body=body),
                       what=f"{collection}.create", retry=False)
        if created.get("name"):
            self._names[job_id] = str(created["name"])
        return self._as_job(created)

    def get_job(self, job_id: str) -> Job:
        return self._as_job(self._require(job_id))

    def list_jobs(self, *, page_size: int = 100, filter: str | None = None) -> Iterator[Job]:
        """Custom and tuning jobs merged, newest first (each collection is listed newest first); Vertex
        filters in another language (AIP-160), so `filter` is left to the caller."""
        streams = [self._list(collection, filter_text=None, page_size=page_size) for collection in _COLLECTIONS]
        for resource in heapq.merge(*streams, key=lambda r: str(r.get("createTime") or ""), reverse=True):
            yield self._as_job(resource)

    def update_labels(self, job_id: str, labels: dict[str, str], *, etag: str | None = None) -> Job:
        raise UsageError(str(self.labels_are_fixed), hint="labels are set when the job is submitted (--labels)")

    def cancel_job(self, job_id: str) -> None:
        name = self._resource_name(job_id)
        collection = collection_of(name)
        call(self._jobs(collection).cancel(name=name, body={}), what=f"{collection}.cancel", retry=True)

    def read_logs(
        self,
        job_id: str,
        *,
        after: LogCursor | None = None,
        task_name: str | None = None,
        limit: int = 1000,
    ) -> list[LogEntry]:
        numeric_id = self._resource_name(job_id).rsplit("/", 1)[-1]
        task = vertex_task_name(task_name) if task_name else None
        log_filter = _logs.job_filter(VERTEX_LOG_RESOURCE, numeric_id, after=after, task_name=task)
        return _logs.read_entries(self._entries, project=self.project, log_filter=log_filter, after=after,
                                  limit=limit, what="logging entries.list", rename_task=ml_task_name)

    # -- lookups by display name -------------------------------------------------------------

    def _list(self, collection: str, *, filter_text: str | None, page_size: int = 100) -> Iterator[dict[str, Any]]:
        page_token: str | None = None
        while True:
            request = self._jobs(collection).list(parent=self._parent, filter=filter_text, pageSize=page_size,
                                                  pageToken=page_token)
            response = call(request, what=f"{collection}.list", retry=True) or {}
            yield from response.get(collection) or []
            page_token = response.get("nextPageToken")
            if not page_token:
                return

    def _find(self, job_id: str) -> dict[str, Any] | None:
        """The newest custom or tuning job displayed as `job_id`, or None."""
        name_filter = f"display_name={_logs.quote(job_id)}"
        matches = [job for collection in _COLLECTIONS for job in self._list(collection, filter_text=name_filter)]
        # The server filters already; re-check in case a server treats the filter loosely.
        matches = [m for m in matches if m.get("displayName") == job_id]
        if not matches:
            return None
        newest = max(matches, key=lambda m: (str(m.get("createTime") or ""), str(m.get("name") or "")))
        self._names[job_id] = str(newest.get("name"))
        return newest

    def _require(self, job_id: str) -> dict[str, Any]:
        name = self._names.get(job_id)
        if name is not None:
            collection = collection_of(name)
            try:
                data: dict[str, Any] = call(self._jobs(collection).get(name=name), what=f"{collection}.get",
                                            retry=True)
                return data
            except NotFound:
                self._names.pop(job_id, None)
        found = self._find(job_id)
        if found is None:
            raise NotFound(f"no Vertex AI custom or tuning job named {job_id} in {self._parent}",
                           hint="list jobs with `aiptrain --backend vertex jobs list`")
        return found

    def _resource_name(self, job_id: str) -> str:
        if job_id not in self._names:
            self._require(job_id)
        return self._names[job_id]

