"""`Client`: jobs on one backend and project, from Python, as `aiptrain jobs ...` handles them.

Each method does what its command does, without printing: `submit` takes the submit command's
flags as keyword arguments (or a whole Job), `wait` returns the ended job (and can stream its log
lines to a callback meanwhile), `logs` returns what the job has written so far. Nothing is imported
until a method runs, so `import aiptrain` stays as light as `aiptrain --help`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiptrain.errors import EXIT_JOB_TIMEOUT, OperationalError, Problem, UsageError

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from aiptrain._api.tensorboard import Board
    from aiptrain._backends.base import Backend, RequestOptions
    from aiptrain._job.logs import LogEntry
    from aiptrain._job.spec import Job
    from aiptrain._storage.base import ObjectStore
    from aiptrain._submit.staging import UploadResult
    from aiptrain._submit.submission import DryRun, SubmitOptions

BACKENDS = ("local", "ray", "vertex", "mlv1")


class WaitTimedOut(OperationalError):
    """`wait` gave up before the job ended; the job keeps running (`job` is how it was last seen)."""

    exit_code = EXIT_JOB_TIMEOUT

    def __init__(self, message: str, job: Job, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.job = job


@dataclass(frozen=True)
class Client:
    """Where jobs go: a backend and a project, as the command line's shared options say them.

    backend:      "local" (default), "ray", "vertex" or "mlv1"
    project:      the project ID (the local backend has a default, `backends.DEFAULT_LOCAL_PROJECT`)
    region:       the Vertex AI region, and a submit's job region when the job names none
    api_endpoint: mlv1 / vertex REST endpoint, e.g. `aiptrain local serve`'s, "http://HOST:PORT/" (it
                  listens on `emulator.defaults.DEFAULT_HOST` and `DEFAULT_PORT` unless told otherwise)
    ray_address, ray_resource_scale: the Ray backend's Jobs API address and bundle scale
    """

    backend: str = "local"
    project: str | None = None
    region: str | None = None
    api_endpoint: str | None = None
    ray_address: str | None = None
    ray_resource_scale: float | None = None
    verbosity: int = 0
    request_options: RequestOptions | None = None  # billing project, trace token, impersonation (REST backends)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise UsageError(f"backend: {self.backend!r} is not one of {', '.join(BACKENDS)}")

    # -- where ---------------------------------------------------------------------------------

    def project_id(self) -> str:
        """The project jobs belong to; the local backend has a default, the others do not."""
        from aiptrain._backends import backend_entry
        from aiptrain._job.project_id import project_id_problem, suggest_project_id

        if self.project:
            problem = project_id_problem(self.project)
            if problem:
                raise UsageError(f"--project: {problem}", hint=f"use e.g. {suggest_project_id(self.project)}")
            return self.project
        default = backend_entry(self.backend).default_project
        if default is None:
            raise UsageError(f"backend {self.backend!r} needs a project",
                             hint="pass --project my-project or set AIPTRAIN_PROJECT (in Python: project='my-project')")
        return default

    def open_backend(self, region: str | None = None) -> Backend:
        """The backend object itself; `region` (a submit's job region) wins over the client's."""
        from aiptrain._backends import get_backend
        from aiptrain._backends.base import BackendSettings, RequestOptions
        from aiptrain._paths import aiptrain_home

        settings = BackendSettings(project=self.project_id(), region=region or self.region, home=aiptrain_home(),
                                   api_endpoint=self.api_endpoint, verbosity=self.verbosity,
                                   ray_address=self.ray_address, ray_resource_scale=self.ray_resource_scale,
                                   request_options=self.request_options or RequestOptions())
        return get_backend(self.backend, settings)

    # -- jobs ----------------------------------------------------------------------------------

    def submit(self, job_id: str | None = None, *, job: Job | Mapping[str, Any] | None = None,
               package_path: str | Path | None = None, packages: Sequence[str] | None = None,
               module_name: str | None = None, config: str | Path | None = None, args: Sequence[str] | None = None,
               region: str | None = None, job_dir: str | None = None, staging_bucket: str | None = None,
               scale_tier: str | None = None, runtime_version: str | None = None,
               python_version: str | None = None, labels: Mapping[str, str] | None = None,
               storage: str | None = None, **flags: Any) -> Job:
        """Submit a training job, as `aiptrain jobs submit training` does; returns it as created.

        Either the submit command's flags, by their Python names (`package_path`, `module_name`,
        `runtime_version`, `master_machine_type`, `worker_count`, `master_accelerator=("nvidia-tesla-t4", 1)`,
        `kms_key`, ...; `args` are the trainer's arguments after `--`), or `job`: a Job, or its REST
        body as `--config` holds it, with flags on top as on the command line. `storage` is where a
        `package_path` build is staged ("local" or "gcs"; default: the backend's). Each value is
        parsed as the command line parses its flag (`scale_tier="basic-gpu"` as `--scale-tier basic-gpu`).

        Raises ValidationFailed (nothing uploaded or created) naming every problem of the input.
        """
        options, store, problems = self._options(job_id, job=job, config=config, args=args, region=region,
                                                 package_path=package_path, packages=packages,
                                                 module_name=module_name, job_dir=job_dir,
                                                 staging_bucket=staging_bucket, scale_tier=scale_tier,
                                                 runtime_version=runtime_version, python_version=python_version,
                                                 labels=labels, storage=storage, **flags)
        return self.submit_options(options, storage=store, flag_problems=problems)

    def dry_run(self, job_id: str | None = None, *, storage: str | None = None, **arguments: Any) -> dict[str, Any]:
        """What `submit` with the same arguments would send and start, with nothing uploaded or
        created: the document `jobs submit training --dry-run --format json` prints (the request
        body, the package and its uploads, the cluster, each replica's TF_CONFIG, the Vertex AI body).

        Raises ValidationFailed naming every problem of the input, as `submit` does.
        """
        options, store, problems = self._options(job_id, storage=storage, **arguments)
        return self.dry_run_options(options, storage=store, flag_problems=problems).document

    def _options(self, job_id: str | None, *, job: Job | Mapping[str, Any] | None = None,
                 config: str | Path | None = None, args: Sequence[str] | None = None, region: str | None = None,
                 storage: str | None = None,
                 **flags: Any) -> tuple[SubmitOptions, str | None, builtins.list[Problem]]:
        """SubmitOptions and the storage from `submit`'s arguments, and the problems of their values,
        exactly as the command line builds them from its flags (`submit.flag_values`)."""
        from aiptrain._job.catalog import load_catalog
        from aiptrain._submit.flag_values import FLAG_NAMES, build_submit_options, parse_storage
        from aiptrain.errors import ProblemList

        if job is not None and config is not None:
            raise UsageError("submit: pass a job or a config file, not both")
        body = _job_body(job)
        chosen_id = job_id or (str(body.get("jobId")) if body and body.get("jobId") else None)
        if not chosen_id:
            raise UsageError("submit: a job ID is needed", hint="pass job_id='my_job' or a job with a jobId")
        if "dry_run" in flags:
            raise UsageError("submit: dry_run is not an argument of submit",
                             hint="call aiptrain.dry_run(...) (or Client.dry_run) with the same arguments")
        unknown = sorted(set(flags) - (FLAG_NAMES - {"config_path"}))
        if unknown:
            raise UsageError(f"submit: unknown argument {unknown[0]!r}",
                             hint="the submit flags by their Python names, e.g. master_machine_type='n1-standard-8'")
        options, problems = build_submit_options(
            chosen_id, {**flags, "config_path": config}, catalog=load_catalog(), project=self.project,
            region=region, default_region=None if region else self.region,
            user_args=builtins.list(args) if args is not None else None, config_body=body)
        storage_problems = ProblemList()
        store = parse_storage(storage, storage_problems)
        return options, store, [*problems, *storage_problems.problems]

    def submit_options(self, options: SubmitOptions, *, storage: str | None = None,
                       flag_problems: builtins.list[Problem] | None = None,
                       on_upload: Callable[[UploadResult], None] | None = None,
                       progress_factory: Any = None, on_warning: Callable[[str], None] | None = None) -> Job:
        """`submit` from parsed SubmitOptions (what the command line builds from its flags).
        The backend's warnings (e.g. Vertex AI running another Python) go to `on_warning`, else
        to Python's `warnings` as AiptrainWarning."""
        from aiptrain._job.catalog import load_catalog
        from aiptrain._submit.submission import submit

        backend, store = self._submit_targets(options, storage)
        return submit(options, backend=backend, catalog=load_catalog(), store=store, project=self.project_id(),
                      flag_problems=flag_problems, on_upload=on_upload, progress_factory=progress_factory,
                      on_warning=on_warning or _warn)

    def dry_run_options(self, options: SubmitOptions, *, storage: str | None = None,
                        flag_problems: builtins.list[Problem] | None = None) -> DryRun:
        """`dry_run` from parsed SubmitOptions: the plan and its document (what `--dry-run` prints)."""
        from aiptrain._job.catalog import load_catalog
        from aiptrain._submit.submission import dry_run_document

        backend, store = self._submit_targets(options, storage)
        return dry_run_document(options, backend=backend, catalog=load_catalog(), store=store,
                                project=self.project_id(), flag_problems=flag_problems)

    def _submit_targets(self, options: SubmitOptions, storage: str | None) -> tuple[Backend, ObjectStore]:
        """The backend for the job's region, and the store its packages are staged in (`storage`,
        else the backend's)."""
        from aiptrain._storage import open_store

        backend = self.open_backend(options.region or options.default_region)
        return backend, open_store(storage or backend.default_storage, project=self.project)

    def get(self, job_id: str) -> Job:
        """The job's resource, as `jobs describe` shows it. NotFound if there is no such job."""
        return self.open_backend().get_job(job_id)

    def list(self, *, filter: str | None = None, limit: int | None = None, sort_by: str | None = None,
             page_size: int = 100) -> builtins.list[Job]:
        """The project's jobs, newest first: `filter` in gcloud's language (`aiptrain topic filters`),
        at most `limit`, sorted by `sort_by` ("~createTime": descending)."""
        from aiptrain._job.filters import parse_filter
        from aiptrain._job.listing import select_jobs

        job_filter = parse_filter(filter)
        return select_jobs(self.open_backend().list_jobs(page_size=page_size, filter=filter),
                           filter_expr=job_filter, limit=limit, sort_by=sort_by)

    def cancel(self, job_id: str) -> None:
        """Ask for the job to be cancelled; JobAlreadyFinished if it has ended."""
        self.open_backend().cancel_job(job_id)

    def wait(self, job_id: str, *, timeout: float | None = None,
             on_entry: Callable[[LogEntry], None] | None = None, task_name: str | None = None) -> Job:
        """Block until the job ends and return it (check `job.state`); WaitTimedOut after `timeout`
        seconds. `on_entry` gets each log line meanwhile (of `task_name` only, when given)."""
        from aiptrain._submit.follow import follow_job, poller_for

        backend = self.open_backend()
        if on_entry is None:
            ended = backend.wait_for_job(job_id, timeout=timeout)
            if ended is not None:
                from aiptrain._job.spec import Job

                job = Job.model_validate(ended.resource)
                if ended.timed_out:
                    raise WaitTimedOut(f"job [{job_id}] is still {job.state} after {timeout:g} s", job)
                return job
        result = follow_job(backend, job_id, on_entry=on_entry, task_name=task_name, timeout=timeout,
                            poller=poller_for(backend))
        if result.timed_out:
            state = result.job.state.value if result.job.state else "unknown"
            raise WaitTimedOut(f"job [{job_id}] is still {state} after {timeout:g} s", result.job,
                               hint=result.unreachable)
        return result.job

    def tensorboard(self, job_id: str, *, port: int = 0) -> AbstractContextManager[Board]:
        """TensorBoard over the job's summaries (its job dir, a run per tuning trial), serving
        while the `with` block runs: `with client.tensorboard("my_job") as board: print(board.url)`."""
        from aiptrain._api.tensorboard import logdir_for, running_tensorboard, tensorboard_python

        job = self.get(job_id)
        logdir = logdir_for(job.training_input.job_dir if job.training_input else None, job_id)
        return running_tensorboard(tensorboard_python(self._job_python(job_id)), logdir, port=port)

    def _job_python(self, job_id: str) -> str | None:
        """The interpreter the job ran with, where the backend recorded it (the local backend)."""
        backend = self.open_backend()
        environment = backend.runtime_environment(job_id)
        python = (environment or {}).get("python")
        return str(python) if python else None

    def logs(self, job_id: str, *, task_name: str | None = None) -> builtins.list[LogEntry]:
        """Every log line the job has written so far, oldest first (of `task_name` only, when given)."""
        return builtins.list(self.iter_logs(job_id, task_name=task_name))

    def iter_logs(self, job_id: str, *, task_name: str | None = None) -> Iterator[LogEntry]:
        """`logs`, a page at a time."""
        backend = self.open_backend()
        after = None
        while True:
            page = backend.read_logs(job_id, after=after, task_name=task_name, limit=1000)
            yield from page
            if len(page) < 1000:
                return
            after = page[-1].cursor


class AiptrainWarning(UserWarning):
    """What a backend says about how it runs a submitted job (e.g. Vertex AI runs another Python)."""


def _warn(text: str) -> None:
    import warnings

    warnings.warn(text, AiptrainWarning, stacklevel=4)


def _job_body(job: Job | Mapping[str, Any] | None) -> dict[str, Any] | None:
    if job is None:
        return None
    if isinstance(job, Mapping):
        return dict(job)
    from aiptrain._job.spec import as_new_job

    return as_new_job(job).to_api()


# -- the same, as functions of `aiptrain` (a Client made from the keyword arguments) ------------


def submit(job_id: str | None = None, *, backend: str = "local", project: str | None = None,
           api_endpoint: str | None = None, **arguments: Any) -> Job:
    """`Client(backend, project, api_endpoint=...).submit(job_id, **arguments)`; see `Client.submit`."""
    return Client(backend, project, api_endpoint=api_endpoint).submit(job_id, **arguments)


def dry_run(job_id: str | None = None, *, backend: str = "local", project: str | None = None,
            api_endpoint: str | None = None, **arguments: Any) -> dict[str, Any]:
    """What `submit` would send and start, nothing sent; see `Client.dry_run`."""
    return Client(backend, project, api_endpoint=api_endpoint).dry_run(job_id, **arguments)


def get(job_id: str, *, backend: str = "local", project: str | None = None, region: str | None = None,
        api_endpoint: str | None = None) -> Job:
    """The job's resource; see `Client.get`."""
    return Client(backend, project, region, api_endpoint).get(job_id)


def list(*, backend: str = "local", project: str | None = None, region: str | None = None,
         api_endpoint: str | None = None, filter: str | None = None, limit: int | None = None,
         sort_by: str | None = None) -> builtins.list[Job]:
    """The project's jobs, newest first; see `Client.list`."""
    return Client(backend, project, region, api_endpoint).list(filter=filter, limit=limit, sort_by=sort_by)


def cancel(job_id: str, *, backend: str = "local", project: str | None = None, region: str | None = None,
           api_endpoint: str | None = None) -> None:
    """Ask for the job to be cancelled; see `Client.cancel`."""
    Client(backend, project, region, api_endpoint).cancel(job_id)


def wait(job_id: str, *, backend: str = "local", project: str | None = None, region: str | None = None,
         api_endpoint: str | None = None, timeout: float | None = None,
         on_entry: Callable[[LogEntry], None] | None = None) -> Job:
    """Block until the job ends and return it; see `Client.wait`."""
    return Client(backend, project, region, api_endpoint).wait(job_id, timeout=timeout, on_entry=on_entry)


def logs(job_id: str, *, backend: str = "local", project: str | None = None, region: str | None = None,
         api_endpoint: str | None = None, task_name: str | None = None) -> builtins.list[LogEntry]:
    """The job's log lines so far; see `Client.logs`."""
    return Client(backend, project, region, api_endpoint).logs(job_id, task_name=task_name)
