"""The tuning study's host on Ray: each trial is a replica set with its own placement group.

`runner.tuning_job.run_tuning` runs the same study as on the local backend (search, metrics,
early stopping, trainingOutput); this host gives it the driver's ways of doing things:

- a trial runs through `Driver.run_set` (its own bundles and actors, released when it ends);
- cloudml-hypertune reports reach the study through a file in a directory of the driver's,
  which each replica's actor mirrors from its own node;
- summary events are read on the cluster, with the replicas' runtime environment (TensorFlow is
  there, not necessarily in the driver's), found (or built) on the node the reading task lands on;
- trainingOutput is printed as one `joblog.OUTPUT_PREFIX` line per change, read back by the
  backend for `jobs describe`;
- resumePreviousJobId finds the earlier job in the payload (the backend looked it up at submit).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from aiptrain._backends.ray import joblog
from aiptrain._job.spec import Job, TrainingInput
from aiptrain._replicas.gs_paths import GS_PREFIX, local_location
from aiptrain._replicas.replica_set import ReplicaSetOutcome
from aiptrain.errors import NotFound

if TYPE_CHECKING:
    from aiptrain._tuning.metrics import MetricReport


class Driver(Protocol):
    """What the host uses of `driver.Driver` (named here so that the modules do not import each other)."""

    payload: dict[str, Any]
    job: Job
    job_id: str
    run_token: str
    training_input: TrainingInput
    storage_root: Path
    stop: threading.Event

    @property
    def printer(self) -> Any: ...

    def run_set(self, ray: Any, *, trial_id: str | None, stop: threading.Event, extra_args: list[str] | None = None,
                job_dir: str | None = None, extra_env: dict[str, str] | None = None) -> ReplicaSetOutcome: ...

class RayTuningHost:
    """`tuning_job.TuningHost` for the driver of a tuning job."""

    def __init__(self, driver: Driver, ray: Any, trials_dir: Path) -> None:
        self.driver = driver
        self.trials_dir = trials_dir  # the trials' metric files, as mirrored from their nodes
        self.ray = ray
        self.stop = driver.stop
        self.job = driver.job.model_copy(deep=True)
        self.lock = threading.Lock()

    @property
    def training_input(self) -> TrainingInput:
        return self.driver.training_input

    @property
    def project(self) -> str:
        return str(self.driver.payload["project"])

    @property
    def job_id(self) -> str:
        return self.driver.job_id

    def say(self, message: str, severity: str = "INFO", trial_id: str | None = None) -> None:
        self.driver.printer.say(message, severity, trial_id)

    def trials_at_once(self, max_parallel_trials: int) -> tuple[int, str | None]:
        """All of them: a trial that does not fit on the cluster yet waits for room."""
        return max_parallel_trials, None

    def metric_path(self, trial_id: str) -> Path:
        return self.trials_dir / trial_id / "hypertune.metrics"

    def run_replica_set(self, *, extra_args: Sequence[str] = (), extra_env: Mapping[str, str] | None = None,
                        trial_id: str | None = None, job_dir: str | None = None,
                        stop: threading.Event | None = None) -> ReplicaSetOutcome:
        return self.driver.run_set(self.ray, trial_id=trial_id, stop=stop or self.stop, extra_args=list(extra_args),
                                   job_dir=job_dir, extra_env=dict(extra_env or {}))

    def summary_metric(self, job_dir: str, tag: str) -> MetricReport | None:
        from aiptrain._backends.ray.replica_host import read_summary_on_node

        directory = local_location(job_dir, self.driver.storage_root) if job_dir.startswith(GS_PREFIX) else job_dir
        payload = self.driver.payload
        # Read with the replicas' Python, in their runtime environment on whichever node the task lands.
        request = {"packagesMode": payload.get("packagesMode", "build"), "runtime": payload["runtime"],
                   "runToken": f"{self.driver.run_token}/summary"}
        from aiptrain._tuning.metrics import SummaryReadError

        found, error = self.ray.get(self.ray.remote(read_summary_on_node).remote(directory, tag, request))
        if error is not None:
            raise SummaryReadError(error)
        report: MetricReport | None = found
        return report

    def update_job(self, mutate: Callable[[Job], None]) -> None:
        with self.lock:
            mutate(self.job)
            output = self.job.training_output.to_api() if self.job.training_output else {}
            self.driver.printer.say(joblog.OUTPUT_PREFIX + json.dumps(output, sort_keys=True))

    def find_job(self, job_id: str) -> Job:
        found = (self.driver.payload.get("previousJobs") or {}).get(job_id)
        if found is None:
            raise NotFound(f"job {job_id!r} not found")
        return Job.model_validate(found)
