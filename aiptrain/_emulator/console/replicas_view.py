"""Each replica of a job: what it asked for, what it is doing, and its part of this machine.

The replicas a job should have come from its TrainingInput (`job.cluster.resolve_cluster`: machine
type, accelerators, image); what became of them from the engine's record of its processes (started,
restarted, exited or killed); their share of the machine (cores, GPUs) from the share the job was
given with its run slot (`replicas.machine_share.JobShare`). A tuning job's replicas are listed per
trial; their shares are per trial slot, listed once under the table.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from aiptrain._backends.local.job_engine import JobProcesses
from aiptrain._backends.local.store import ReplicaRecord
from aiptrain._job.catalog import load_catalog
from aiptrain._job.cluster import ReplicaGroup, resolve_cluster
from aiptrain._job.spec import Job
from aiptrain._replicas.machine_share import Gpu, JobShare, Machine, ReplicaShare
from aiptrain.errors import AiptrainError


@dataclass(frozen=True)
class ReplicaRow:
    trial: str  # "" outside tuning
    task: str
    machine_type: str
    state: str  # waiting | running | exited 0 | exited 3 | killed by SIGKILL | did not start | ended
    restarts: int
    share: str
    gpus: str
    image: str

    @property
    def state_class(self) -> str:
        if self.state == "running":
            return "running"
        if self.state == "exited 0":
            return "succeeded"
        if self.state.startswith(("exited", "killed")):
            return "failed"
        return "queued"


def replica_rows(job: Job, processes: JobProcesses | None, share: JobShare | None) -> list[ReplicaRow]:
    active = job.state is not None and not job.state.is_terminal
    groups = _groups(job)
    by_task = {name: group for group in groups for name in group.task_names()}
    recorded = processes.replicas if processes is not None else []
    tuning = job.training_input is not None and job.training_input.hyperparameters is not None
    shares = {} if tuning or share is None else {s.task_name: s for s in share.lanes[0]} if share.lanes else {}
    machine = _machine(share)
    no_gpus_here = share is not None and share.machine_gpus == 0
    rows: list[ReplicaRow] = []
    seen: set[tuple[str, str]] = set()
    for record in recorded:
        seen.add((record.trial_id, record.task_name))
        rows.append(_row(record.trial_id, record.task_name, by_task.get(record.task_name), record,
                         shares.get(record.task_name), machine, active=active, no_gpus_here=no_gpus_here))
    if not tuning or not recorded:
        for task, group in by_task.items():
            if ("", task) not in seen:
                rows.append(_row("", task, group, None, shares.get(task), machine, active=active,
                                 no_gpus_here=no_gpus_here))
    return sorted(rows, key=lambda row: (_trial_order(row.trial), list(by_task).index(row.task)
                                         if row.task in by_task else len(by_task)))


def share_lines(share: JobShare | None) -> list[str]:
    return share.lines() if share is not None else []


def _groups(job: Job) -> list[ReplicaGroup]:
    if job.training_input is None:
        return []
    try:
        return resolve_cluster(job.training_input, load_catalog())
    except (AiptrainError, KeyError):
        return []  # a tier or machine the catalog no longer knows: the records still show


def _machine(share: JobShare | None) -> Machine | None:
    if share is None:
        return None
    return Machine(tuple(range(share.machine_cores)), tuple(Gpu(i, name) for i, name in share.gpu_names.items()))


def _trial_order(trial: str) -> tuple[int, str]:
    return (int(trial), "") if trial.isdigit() else (-1, trial)


def _row(trial: str, task: str, group: ReplicaGroup | None, record: ReplicaRecord | None,
         share: ReplicaShare | None, machine: Machine | None, *, active: bool, no_gpus_here: bool) -> ReplicaRow:
    return ReplicaRow(
        trial=trial,
        task=task,
        machine_type=(group.machine_type or "") if group else "",
        state=_state(record, active=active),
        restarts=record.restarts if record is not None else 0,
        share=share.describe(machine) if share is not None and machine is not None else "",
        gpus=_gpus(group, share, no_gpus_here=no_gpus_here),
        image=(group.image_uri or "") if group else "",
    )


def _state(record: ReplicaRecord | None, *, active: bool) -> str:
    if record is None:
        return "waiting" if active else "did not start"
    if record.signal is not None:
        try:
            name = signal.Signals(record.signal).name
        except ValueError:
            name = f"signal {record.signal}"
        return f"killed by {name}"
    if record.exit_code is not None:
        return f"exited {record.exit_code}"
    return "running" if active else "ended"


def _gpus(group: ReplicaGroup | None, share: ReplicaShare | None, *, no_gpus_here: bool) -> str:
    asked = f"{group.accelerator_count} x {group.accelerator_type}" if group and group.accelerator_count else ""
    if share is not None and share.gpus:
        held = ", ".join(str(index) for index in share.gpus)
        return f"{asked}: GPU {held}" if asked else f"GPU {held}"
    if asked and no_gpus_here:
        return f"{asked} (this machine has none: runs on the CPU)"
    return asked
