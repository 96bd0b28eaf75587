"""The `mlv1` backend: any endpoint that speaks the legacy `ml.googleapis.com/v1` REST API.

First of all aiptrain's own emulator (`aiptrain local serve`); the endpoint comes from
`--api-endpoint` / $AIPTRAIN_API_ENDPOINT and defaults to the retired Google service. Jobs are
sent exactly as the service took them; logs are read from Cloud Logging v2 (or the emulator's
copy of it) with gcloud's filter and a `(timestamp, insertId)` cursor.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, ClassVar

from aiptrain._backends.base import BackendSettings, RemoteBackendDefaults
from aiptrain._backends.mlv1 import logs as _logs
from aiptrain._backends.mlv1.client import (
    DEFAULT_LOGGING_ENDPOINT,
    LOGGING_ENDPOINT_ENV,
    build_client,
    call,
    is_overridden,
    resolve_endpoint,
)
from aiptrain._backends.polling import GOOGLE_PACE, pace_for
from aiptrain._job.logs import LogCursor, LogEntry
from aiptrain._job.spec import Job, job_from_api, job_resource_name, without_output_fields
from aiptrain.errors import AlreadyExists, EtagMismatch, NotFound, Problem

DEFAULT_ENDPOINT = "https://ml.googleapis.com/"
# The resource types ml v1 training jobs logged under (gcloud queries both).
ML_JOB_RESOURCE = '(resource.type="ml_job" OR resource.type="cloudml_job")'


def logging_endpoint(api_endpoint: str | None, resolved_api: str) -> str:
    """Cloud Logging, unless the API endpoint was overridden: an emulator serves both."""
    explicit = os.environ.get(LOGGING_ENDPOINT_ENV)
    if explicit:
        return resolve_endpoint(explicit, DEFAULT_LOGGING_ENDPOINT)
    return resolved_api if is_overridden(api_endpoint) else DEFAULT_LOGGING_ENDPOINT


class MlV1Backend(RemoteBackendDefaults):
    labels_are_fixed: ClassVar[str | None] = None
    name: ClassVar[str] = "mlv1"
    poll_seconds: tuple[float, float] = GOOGLE_PACE
    default_storage: ClassVar[str] = "gcs"

    def __init__(self, settings: BackendSettings) -> None:
        self.settings = settings
        self.project = settings.project
        self.endpoint = resolve_endpoint(settings.api_endpoint, DEFAULT_ENDPOINT)
        self.poll_seconds = pace_for(self.endpoint)
        self.logging_endpoint = logging_endpoint(settings.api_endpoint, self.endpoint)
        self._ml: Any = None
        self._logging: Any = None

    # Clients are built on first use, so `--dry-run` never looks for credentials.
    @property
    def _jobs(self) -> Any:
        if self._ml is None:
            self._ml = build_client("ml", "v1", self.endpoint, self.settings.request_options)
        return self._ml.projects().jobs()

    @property
    def _entries(self) -> Any:
        if self._logging is None:
            self._logging = build_client("logging", "v2", self.logging_endpoint, self.settings.request_options)
        return self._logging

    def _name(self, job_id: str) -> str:
        return job_resource_name(self.project, job_id)

    def unsupported(self, job: Job) -> list[Problem]:
        return []  # the endpoint speaks ml v1 itself; it refuses what it cannot run

    def request_body(self, job: Job) -> dict[str, Any]:
        return without_output_fields(job.to_api())

    def create_job(self, job: Job) -> Job:
        request = self._jobs.create(parent=f"projects/{self.project}", body=self.request_body(job))
        return job_from_api(call(request, what="projects.jobs.create", retry=False))

    def get_job(self, job_id: str) -> Job:
        try:
            data = call(self._jobs.get(name=self._name(job_id)), what="projects.jobs.get", retry=True)
        except NotFound as error:
            raise NotFound(f"job {job_id} not found in project {self.project}",
                           hint="list jobs with `aiptrain jobs list`") from error
        return job_from_api(data)

    def list_jobs(self, *, page_size: int = 100, filter: str | None = None) -> Iterator[Job]:
        # Not sent, as gcloud did not send it: an ml v1 server understood only part of the language.
        page_token: str | None = None
        while True:
            request = self._jobs.list(parent=f"projects/{self.project}", pageSize=page_size,
                                      pageToken=page_token)
            response = call(request, what="projects.jobs.list", retry=True) or {}
            for data in response.get("jobs") or []:
                yield job_from_api(data)
            page_token = response.get("nextPageToken")
            if not page_token:
                return

    def update_labels(self, job_id: str, labels: dict[str, str], *, etag: str | None = None) -> Job:
        """jobs.patch with updateMask=labels, as gcloud sent it; with the etag read before, so a
        job changed in between is not overwritten (the service answers ABORTED)."""
        body: dict[str, Any] = {"labels": labels}
        mask = "labels"
        if etag:
            body["etag"] = etag
            mask = "labels,etag"
        request = self._jobs.patch(name=self._name(job_id), body=body, updateMask=mask)
        try:
            return job_from_api(call(request, what="projects.jobs.patch", retry=False))
        except NotFound as error:
            raise NotFound(f"job {job_id} not found in project {self.project}",
                           hint="list jobs with `aiptrain jobs list`") from error
        except AlreadyExists as error:  # 409 ABORTED: the etag no longer matches
            raise EtagMismatch(error.message, hint="the job changed since it was read; run the update again") \
                from error

    def cancel_job(self, job_id: str) -> None:
        try:
            call(self._jobs.cancel(name=self._name(job_id), body={}), what="projects.jobs.cancel", retry=True)
        except NotFound as error:
            raise NotFound(f"job {job_id} not found in project {self.project}") from error

    def read_logs(
        self,
        job_id: str,
        *,
        after: LogCursor | None = None,
        task_name: str | None = None,
        limit: int = 1000,
    ) -> list[LogEntry]:
        log_filter = _logs.job_filter(ML_JOB_RESOURCE, job_id, after=after, task_name=task_name)
        return _logs.read_entries(self._entries, project=self.project, log_filter=log_filter,
                                  after=after, limit=limit, what="logging entries.list")
