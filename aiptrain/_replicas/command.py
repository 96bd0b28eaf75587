"""What one replica runs: a trainer module in a Python process, or an image as a container.

A job's context (the local backend's job context, the Ray driver) makes one `ReplicaCommand` per
task before the replica set starts, and the set hands that same value to its launcher: a process
launcher runs a `ProcessCommand`, a container launcher a `ContainerCommand`. Neither is turned
into an argument list and parsed back on the way; both are frozen, so one travels to a Ray
node's actor as it is (pickled).
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from aiptrain._job.cluster import ReplicaGroup
from aiptrain._replicas.containers.command import ContainerCommand


@dataclass(frozen=True)
class ProcessCommand:
    """`PYTHON -m MODULE ARGS... [--job-dir DIR]`: a trainer package's replica."""

    python: str
    module: str
    args: tuple[str, ...] = ()
    job_dir: str | None = None
    # ml v1 appended `--job-dir` to the trainer's arguments; Vertex AI hands a Python package its
    # output directory only through AIP_MODEL_DIR, AIP_CHECKPOINT_DIR and AIP_TENSORBOARD_LOG_DIR.
    job_dir_argument: bool = True

    def argv(self) -> list[str]:
        argv = [self.python, "-m", self.module, *self.args]
        if self.job_dir and self.job_dir_argument:
            argv += ["--job-dir", self.job_dir]
        return argv

    def with_python(self, python: str) -> ProcessCommand:
        """The same command run by another interpreter (a Ray node's runtime environment's)."""
        return dataclasses.replace(self, python=python)

    def describe(self) -> str:
        return shlex.join(self.argv())


ReplicaCommand: TypeAlias = ProcessCommand | ContainerCommand


def for_every_replica(groups: Sequence[ReplicaGroup], command: ReplicaCommand) -> dict[str, ReplicaCommand]:
    """Task name -> `command`, for every replica of `groups` (a trainer package's replicas all run
    the same command; only their variables differ)."""
    return {task_name: command for group in groups for task_name in group.task_names()}
