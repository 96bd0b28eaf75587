"""What runs a stored job when no local supervisor does.

`local serve --backend ray` keeps its jobs in this store, as the local engine does, but a relay of
the server runs them on a Ray cluster: it takes each queued job in turn, copies its states and log
lines back here, and carries cancels over. The engine stores such a job under the runner's name
and wakes the runner; no local dispatcher, reaper or run slot touches it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from aiptrain._job.spec import Job
    from aiptrain.errors import Problem


class JobRunner(Protocol):
    # Stored with each job it runs (the `runner` column): its jobs are `JobStore.runner_jobs(name)`.
    name: str

    def wake(self) -> None:
        """A job of this runner was created, or asked to stop: look at the store now, not at the next tick."""

    def refusal(self, job: Job) -> list[Problem]:
        """Why it cannot run `job`, as the CLI refuses it for its backend; [] when it can."""
