"""The `vertex` backend: the job runs as a Vertex AI CustomJob, and is shown as an ml v1 Job.

The job ID becomes the CustomJob's display name. Vertex allows several CustomJobs with one display
name, but an aiptrain job ID names one job, so `create_job` refuses (AlreadyExists, exit 1) when
any CustomJob of that display name exists in the project and region, whatever its state: the
alternative, silently picking one of several, would make describe/cancel/stream-logs ambiguous.
Lookups use the newest CustomJob with that display name.

Logs come from Cloud Logging: Vertex writes them under `resource.type="ml_job"` with the numeric
CustomJob ID as `job_id`, and task names `workerpool<N>-<I>`, which are shown as the ml v1 names
(`master-replica-0`, `worker-replica-1`, ...). `--task-name` accepts either form.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from aiptrain.backends import _logs
from aiptrain.backends.base import BackendSettings, LogCursor, LogEntry
from aiptrain.backends.mlv1 import logging_endpoint
from aiptrain.backends.rest import call, resolve_endpoint
from aiptrain.catalog import Catalog, load_catalog
from aiptrain.errors import AlreadyExists, NotFound, Problem, UsageError
from aiptrain.spec import Job
from aiptrain.vertex_translate import (
    custom_job_to_job,
    job_to_custom_job,
    ml_task_name,
    vertex_problems,
    vertex_task_name,
)

VERTEX_LOG_RESOURCE = 'resource.type="ml_job"'


def default_endpoint(region: str) -> str:
    return f"https://{region}-aiplatform.googleapis.com/"


class VertexBackend:
    name: ClassVar[str] = "vertex"
    default_storage: ClassVar[str] = "gcs"

    def __init__(self, settings: BackendSettings, catalog: Catalog | None = None) -> None:
        self.settings = settings
        self.project = settings.project
        self.region = settings.region
        self.catalog = catalog or load_catalog()
        self._client: Any = None
        self._logging: Any = None
        # display name -> resource name of its CustomJob (names never change once created).
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

    @property
    def _custom_jobs(self) -> Any:
        if self._client is None:
            from aiptrain.backends.rest import build_client

            self._client = build_client("aiplatform", "v1", self.endpoint)
        return self._client.projects().locations().customJobs()

    @property
    def _entries(self) -> Any:
        if self._logging is None:
            from aiptrain.backends.rest import build_client

            self._logging = build_client("logging", "v2",
                                         logging_endpoint(self.settings.api_endpoint, self.endpoint))
        return self._logging

    @property
    def _parent(self) -> str:
        return f"projects/{self.project}/locations/{self._require_region()}"

    # -- Backend ---------------------------------------------------------------------------

    def unsupported(self, job: Job) -> list[Problem]:
        return vertex_problems(job, self.catalog)

    def request_body(self, job: Job) -> dict[str, Any]:
        return job_to_custom_job(job, self.catalog)

    def create_job(self, job: Job) -> Job:
        if not self.region and job.training_input is not None:
            # The job's own region (from --config) decides where it is created.
            self.region = job.training_input.region
        body = self.request_body(job)
        job_id = body["displayName"]
        existing = self._find(job_id)
        if existing is not None:
            raise AlreadyExists(
                f"a Vertex AI custom job named {job_id} already exists in {self._parent} "
                f"({existing.get('name')})",
                hint="job IDs name one job: choose another job ID",
            )
        created = call(self._custom_jobs.create(parent=self._parent, body=body),
                       what="customJobs.create", retry=False)
        if created.get("name"):
            self._names[job_id] = str(created["name"])
        return custom_job_to_job(created, self.catalog)

    def get_job(self, job_id: str) -> Job:
        return custom_job_to_job(self._require(job_id), self.catalog)

    def list_jobs(self, *, page_size: int = 100) -> Iterator[Job]:
        for custom_job in self._list(filter_text=None, page_size=page_size):
            yield custom_job_to_job(custom_job, self.catalog)

    def cancel_job(self, job_id: str) -> None:
        name = self._resource_name(job_id)
        call(self._custom_jobs.cancel(name=name, body={}), what="customJobs.cancel", retry=True)

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

    def _list(self, *, filter_text: str | None, page_size: int = 100) -> Iterator[dict[str, Any]]:
        page_token: str | None = None
        while True:
            request = self._custom_jobs.list(parent=self._parent, filter=filter_text, pageSize=page_size,
                                             pageToken=page_token)
            response = call(request, what="customJobs.list", retry=True) or {}
            yield from response.get("customJobs") or []
            page_token = response.get("nextPageToken")
            if not page_token:
                return

    def _find(self, job_id: str) -> dict[str, Any] | None:
        """The newest CustomJob displayed as `job_id`, or None."""
        matches = list(self._list(filter_text=f"display_name={_logs.quote(job_id)}"))
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
            try:
                data: dict[str, Any] = call(self._custom_jobs.get(name=name), what="customJobs.get",
                                            retry=True)
                return data
            except NotFound:
                self._names.pop(job_id, None)
        found = self._find(job_id)
        if found is None:
            raise NotFound(f"no Vertex AI custom job named {job_id} in {self._parent}",
                           hint="list jobs with `aiptrain --backend vertex jobs list`")
        return found

    def _resource_name(self, job_id: str) -> str:
        if job_id not in self._names:
            self._require(job_id)
        return self._names[job_id]

