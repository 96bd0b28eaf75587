"""The local job store's run slots: the machine's limit on running jobs, and the first-come,
first-served queue of the jobs waiting under it.

A slot and the job's part of the machine (`machine_share`: cores, GPUs) are claimed in one
`BEGIN IMMEDIATE` transaction with the count they depend on, so two supervisors can never both
take the last slot or the same device.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiptrain._backends.local.store_connection import StoreConnection
from aiptrain._backends.local.store_records import dump_job, job_model
from aiptrain._job.state import JobState

# (the machine shares of the jobs holding a slot) -> this job's, or None when it must wait.
SlotClaim = Callable[[list[dict[str, Any]]], "dict[str, Any] | None"]


class SlotQueue(StoreConnection):
    """The slots section of the job store."""

    def try_acquire_slot(self, key: int, limit: int, claim: SlotClaim | None = None) -> bool:
        """Claim a run slot if fewer than the machine's limit (`max_running`; `limit` when none was
        set) jobs hold one and this job is next in line. One limit for every job keeps the queue
        first come, first served whatever each submitter's setting was.

        First come, first served: a job takes a slot only if every waiting job created before it
        could take one too. Count and claim share one IMMEDIATE transaction, so two supervisors
        can never both take the last slot.

        `claim`, if given, is asked inside that transaction for the job's part of the machine,
        given the parts the jobs holding a slot hold (their `machine_share`); it returns the part
        to record with the slot, or None when what the job needs is held by others (it waits, and
        so do the jobs behind it). The slot and the devices are taken and freed together.
        """
        if not self._slot_looks_free(key, limit, claim):
            return False  # a read is enough to say no; only a likely yes takes the write lock
        with self._write() as tx:
            row = tx.execute("SELECT state, holds_slot FROM jobs WHERE key = ?", (key,)).fetchone()
            if row is None or row["state"] != JobState.QUEUED.value:
                return False
            if row["holds_slot"]:
                return True
            if not self._slot_free_in(tx.execute, key, limit):
                return False
            share = claim(_held_shares(tx.execute)) if claim is not None else None
            if claim is not None and share is None:
                return False
            resource = tx.execute("SELECT resource FROM jobs WHERE key = ?", (key,)).fetchone()[0]
            job = job_model(resource)
            job.job_position = 0
            tx.execute("UPDATE jobs SET holds_slot = 1, resource = ?, machine_share = ? WHERE key = ?",
                       (dump_job(job), json.dumps(share) if share is not None else None, key))
        return True

    def _slot_looks_free(self, key: int, limit: int, claim: SlotClaim | None) -> bool:
        execute = self.connection().execute
        if not self._slot_free_in(execute, key, limit):
            return False
        return claim is None or claim(_held_shares(execute)) is not None

    def set_max_running(self, limit: int) -> None:
        """Make `limit` the machine's limit on jobs holding a run slot, for every job (queued ones too)."""
        with self._write() as tx:
            tx.execute("INSERT INTO machine_settings (name, value) VALUES ('max_running', ?)"
                       " ON CONFLICT (name) DO UPDATE SET value = excluded.value", (str(limit),))

    def max_running(self, default: int) -> int:
        """The machine's limit on running jobs: the one last set (`set_max_running`), else `default`."""
        return stored_max_running(self.connection().execute, default)

    @staticmethod
    def _slot_free_in(execute: Callable[..., Any], key: int, limit: int) -> bool:
        limit = stored_max_running(execute, limit)
        running = execute("SELECT COUNT(*) FROM jobs WHERE holds_slot = 1").fetchone()[0]
        ahead = execute(
            "SELECT COUNT(*) FROM jobs WHERE state = ? AND holds_slot = 0 AND key < ?",
            (JobState.QUEUED.value, key),
        ).fetchone()[0]
        return int(running) + int(ahead) < limit

    def queue_position(self, key: int, runner: str | None = None) -> int:
        """1 + the number of jobs waiting ahead of this one (it must be waiting too): for a slot of this
        machine, or, for a job of a `runner`, for that runner to take them."""
        args: tuple[object, ...]
        if runner is None:
            sql, args = "SELECT COUNT(*) FROM jobs WHERE state = ? AND holds_slot = 0 AND runner IS NULL AND key < ?", (
                JobState.QUEUED.value, key)
        else:
            sql, args = ("SELECT COUNT(*) FROM jobs WHERE state = ? AND runner = ? AND runner_job IS NULL AND key < ?",
                         (JobState.QUEUED.value, runner, key))
        row = self.connection().execute(sql, args).fetchone()
        return int(row[0]) + 1


def stored_max_running(execute: Callable[..., Any], default: int) -> int:
    row = execute("SELECT value FROM machine_settings WHERE name = 'max_running'").fetchone()
    return int(row[0]) if row is not None else default


def _held_shares(execute: Callable[..., Any]) -> list[dict[str, Any]]:
    rows = execute("SELECT machine_share FROM jobs WHERE holds_slot = 1 AND machine_share IS NOT NULL").fetchall()
    return [json.loads(row[0]) for row in rows]
