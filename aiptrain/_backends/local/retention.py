"""Pruning finished jobs: `aiptrain local prune`.

A pruned job loses its store rows (the job, its state history, replicas and every log line), its
directory under `$AIPTRAIN_HOME/jobs` (its installed packages there are hard links shared with the
install cache and other jobs: removing the job's links leaves their files to the others),
and the staged packages under `storage/` that no job left in
the store names; its outputs (its `--job-dir` under `storage/`) go only when asked for. A job that
is not finished is never touched: the delete checks each job's state in the same transaction.
The store is compacted afterwards (VACUUM), so the file shrinks by what was deleted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from aiptrain._backends.local.layout import JobLayout
from aiptrain._backends.local.store import JobRecord, JobStore
from aiptrain._paths import HomeLayout
from aiptrain.errors import AiptrainError, NotFound


@dataclass(frozen=True)
class PrunedJob:
    key: int
    directory: Path | None  # its directory under $AIPTRAIN_HOME/jobs, when it has its own
    project: str
    job_id: str
    state: str
    ended: str | None
    log_bytes: int
    directory_bytes: int


@dataclass
class PrunePlan:
    jobs: list[PrunedJob] = field(default_factory=list)
    packages: list[Path] = field(default_factory=list)
    outputs: list[Path] = field(default_factory=list)

    def bytes_freed(self) -> int:
        """Roughly what pruning frees: log messages, job directories, packages and outputs."""
        files = sum(tree_bytes(path) for path in [*self.packages, *self.outputs])
        return sum(job.log_bytes + job.directory_bytes for job in self.jobs) + files


def tree_bytes(path: Path, *, unshared_only: bool = False) -> int:
    """The bytes of the files under `path` (a file: its size), each file once however many links
    it has there; 0 when it is gone. `unshared_only`: only files with no link elsewhere (a job's
    installed packages are links into the install cache), which is what deleting the tree frees."""
    if path.is_file():
        return path.stat().st_size
    sizes: dict[tuple[int, int], int] = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                stat = os.lstat(os.path.join(root, name))
                if not (unshared_only and stat.st_nlink > 1):
                    sizes[(stat.st_dev, stat.st_ino)] = stat.st_size
    return sum(sizes.values())


def _ended(record: JobRecord) -> datetime:
    stamp = record.job.end_time
    if stamp:
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return datetime.fromtimestamp(record.created_epoch, UTC)


def _storage_path(uri: str, storage_root: Path) -> Path | None:
    from aiptrain._storage.local import local_path_for

    if not uri.startswith("gs://"):
        return None
    try:
        return local_path_for(uri, storage_root)
    except AiptrainError:
        return None


def plan_prune(store: JobStore, home: Path, *, older_than: timedelta | None, named: Sequence[tuple[str, str]] = (),
               outputs: bool = False, now: datetime | None = None) -> PrunePlan:
    """What pruning the finished jobs that ended more than `older_than` ago, and the `named`
    (project, job ID) ones, would delete. A named job that is not finished is an error."""
    finished = store.finished_jobs()
    chosen: dict[int, JobRecord] = {}
    if older_than is not None:
        cutoff = (now or datetime.now(UTC)) - older_than
        chosen.update((record.key, record) for record in finished if _ended(record) < cutoff)
    by_name = {(record.project, record.job_id): record for record in finished}
    for project, job_id in named:
        record = by_name.get((project, job_id))
        if record is None:
            state = store.get(project, job_id).state.value  # NotFound when there is no such job
            raise NotFound(f"job {job_id!r} is {state}; only finished jobs are pruned",
                           hint=f"cancel it first: aiptrain jobs cancel {job_id}")
        chosen[record.key] = record
    plan = PrunePlan()
    kept_packages, kept_dirs = _still_named(store, set(chosen))
    storage_root = HomeLayout(home).storage
    packages: set[Path] = set()
    job_outputs: set[Path] = set()
    for key, record in sorted(chosen.items()):
        directory = JobLayout.of(home, record.project, record.job_id, key).root
        owned = _owned_by(directory, record.run_token)
        plan.jobs.append(PrunedJob(key, directory if owned else None, record.project, record.job_id,
                                   record.state.value, record.job.end_time, store.log_bytes(key),
                                   tree_bytes(directory, unshared_only=True) if owned else 0))
        training_input = record.job.training_input
        if training_input is None:
            continue
        for uri in training_input.package_uris or []:
            path = _storage_path(uri, storage_root)
            if uri not in kept_packages and path is not None and path.exists():
                packages.add(path)
        if outputs and training_input.job_dir and training_input.job_dir not in kept_dirs:
            path = _storage_path(training_input.job_dir, storage_root)
            if path is not None and path.exists() and path != storage_root and storage_root in path.parents:
                job_outputs.add(path)
    plan.packages = sorted(packages)
    plan.outputs = sorted(job_outputs)
    return plan


def _still_named(store: JobStore, pruned: set[int]) -> tuple[set[str], set[str]]:
    """Package URIs and job directories of the jobs that stay."""
    packages: set[str] = set()
    job_dirs: set[str] = set()
    for record in store.active_jobs() + [r for r in store.finished_jobs() if r.key not in pruned]:
        training_input = record.job.training_input
        if training_input is None:
            continue
        packages.update(training_input.package_uris or [])
        if training_input.job_dir:
            job_dirs.add(training_input.job_dir)
    return packages, job_dirs


def _owned_by(directory: Path, run_token: str) -> bool:
    """Whether the directory is the job's (marked with its run token, or unmarked from an older version)."""
    try:
        return (directory / ".run-token").read_text(encoding="ascii") == run_token
    except FileNotFoundError:
        return directory.is_dir()
    except (OSError, UnicodeDecodeError):
        return False


@dataclass(frozen=True)
class PruneResult:
    deleted: int
    store_bytes_before: int
    store_bytes_after: int


def prune(store: JobStore, plan: PrunePlan) -> PruneResult:
    """Delete what `plan` lists (jobs that started running again meanwhile stay), then compact."""
    before = store.file_bytes()
    deleted = set(store.delete_finished([job.key for job in plan.jobs]))
    for job in plan.jobs:
        if job.key in deleted and job.directory is not None:
            shutil.rmtree(job.directory, ignore_errors=True)
    if deleted:
        for path in [*plan.packages, *plan.outputs]:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    store.compact()
    return PruneResult(len(deleted), before, store.file_bytes())
