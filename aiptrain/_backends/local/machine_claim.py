"""A job's part of this machine, taken together with its run slot.

The store records each running job's share (`jobs.machine_share`) in the transaction that gives
it its slot, and frees both when the job ends, so the cores and GPUs held across the machine are
always those of the jobs holding a slot. A job whose GPUs are held by others waits QUEUED, in
line like a job waiting for a slot (`MachineClaim` answers "not now"); the supervisor says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aiptrain._job.catalog import Catalog
from aiptrain._job.cluster import ReplicaGroup
from aiptrain._job.spec import TrainingInput
from aiptrain._replicas.cluster_plan import trial_lanes
from aiptrain._replicas.machine_share import (
    GpuWait,
    JobShare,
    Machine,
    ReplicaAsk,
    gpu_refusal,
    gpus_per_run,
    replica_asks,
    share_job,
)
from aiptrain._replicas.settings import ReplicaSettings
from aiptrain._replicas.this_machine import this_machine


class MachineClaim:
    """The `claim` of `JobStore.try_acquire_slot`: this job's share around what others hold."""

    def __init__(self, asks: Sequence[ReplicaAsk], machine: Machine, lanes: int, settings: ReplicaSettings) -> None:
        self.asks = list(asks)
        self.machine = machine
        self.lanes = lanes
        self.settings = settings
        self.waiting: GpuWait | None = None  # why the last answer was "not now"

    @classmethod
    def for_job(
        cls, training_input: TrainingInput, groups: list[ReplicaGroup], catalog: Catalog, settings: ReplicaSettings,
    ) -> MachineClaim:
        asks = replica_asks(groups, catalog)
        machine = this_machine(gpus=gpus_per_run(asks) > 0)
        return cls(asks, machine, trial_lanes(training_input, groups, catalog, len(machine.gpus)), settings)

    def refusal(self) -> str | None:
        """Why this machine can never run the job (more GPUs than it has); None if it can."""
        return gpu_refusal(self.asks, self.machine.gpus)

    def __call__(self, held: list[dict[str, Any]]) -> dict[str, Any] | None:
        share = share_job(
            self.asks, self.machine,
            held_cores={int(core) for part in held for core in part.get("cores", ())},
            held_gpus={int(gpu) for part in held for gpu in part.get("gpus", ())},
            lanes=self.lanes, cpu=self.settings.sizes_threads, pin=self.settings.pins_cores,
        )
        if isinstance(share, GpuWait):
            self.waiting = share
            return None
        return share.to_json()

    def forget_wait(self) -> None:
        self.waiting = None

    def waiting_line(self) -> str:
        wait = self.waiting
        assert wait is not None
        return (f"Waiting for GPUs: the job's replicas need {wait.needed} of this machine's {wait.total}, "
                f"{wait.free} are free; other jobs hold the rest.")


def recorded_share(stored: dict[str, Any] | None) -> JobShare | None:
    return JobShare.from_json(stored) if stored else None


def share_lines(share: JobShare | None, environ: Mapping[str, str]) -> list[str]:
    """What the job's log says once: each replica's part, and the variables kept as the user set them."""
    if share is None:
        return []
    lines = [f"Share of this machine: {line}" for line in share.lines()]
    first = share.lanes[0][0] if share.lanes and share.lanes[0] else None
    kept = first.environment(environ)[1] if first is not None else []
    if kept:
        lines.append("Kept as set in the environment, for every replica: "
                     + ", ".join(f"{name}={environ[name]}" for name in kept) + ".")
    return lines
