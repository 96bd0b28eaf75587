"""Decide where packages go in the staging bucket, skip those already there, upload the rest.

Object names are content-addressed and shared across jobs:

    gs://STAGING_BUCKET[/PREFIX]/aiptrain/packages/<sha256 of the file>/<file name>

so an unchanged trainer is uploaded once, however many jobs use it. (gcloud hashes all files
of one submission together under the job's name and re-uploads every time.) An object that is
present and holds the same bytes is reused; one that is present with other bytes (a partial or
foreign object) is replaced.

`plan_uploads` has no side effects beyond `stat` calls, so dry-run can show the plan;
`execute_uploads` carries it out. Each file is read once to hash it, at planning: execution
reuses those digests when the file's state (inode, size, times) shows it was not written to since,
and reads it again only when it cannot tell. A file that did change is refused either way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from aiptrain._job.validate import check_gs_uri
from aiptrain._packaging import check_duplicate_basenames
from aiptrain._storage.base import (
    LocalDigests,
    ObjectStore,
    ProgressCallback,
    digest_file,
    join_gs_uri,
    split_gs_uri,
)
from aiptrain.errors import OperationalError, Problem, UsageError, ValidationFailed

PACKAGES_PREFIX = "aiptrain/packages"

PlanStatus = Literal["reuse", "upload", "unknown"]
UploadAction = Literal["reused", "uploaded"]


@dataclass(frozen=True)
class UploadPlan:
    local: Path
    uri: str
    sha256: str
    size: int
    # "reuse": present with the same bytes; "upload": absent, or present with other bytes;
    # "unknown": not checked (dry-run without looking at the bucket).
    status: PlanStatus
    reason: str = ""
    # Every checksum of the file as planned, with its state then; None for plans made elsewhere.
    digests: LocalDigests | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class UploadResult:
    local: Path
    uri: str
    sha256: str
    size: int
    action: UploadAction
    bytes_sent: int
    seconds: float


# Builds the progress callback for one planned upload (the CLI draws a bar per file).
ProgressFactory = Callable[[UploadPlan], ProgressCallback | None]


def staging_uri(staging_bucket: str, sha256: str, basename: str) -> str:
    """The content-addressed object for a file: `gs://B[/P]/aiptrain/packages/<sha256>/<name>`.

    `staging_bucket` may be `gs://bucket`, `gs://bucket/prefix` or a bare bucket name.
    """
    location = staging_bucket if staging_bucket.startswith("gs://") else f"gs://{staging_bucket}"
    bucket, prefix = split_gs_uri(location)
    parts = [p for p in (prefix.strip("/"), PACKAGES_PREFIX, sha256, basename) if p]
    return join_gs_uri(bucket, "/".join(parts))


def plan_uploads(
    files: Iterable[Path],
    staging_bucket: str,
    store: ObjectStore | None,
    *,
    check_existing: bool,
) -> list[UploadPlan]:
    """Hash each file and, when asked (and a store is given), check what the bucket already has."""
    plans = []
    for local in files:
        try:
            digests = digest_file(local)
        except OSError as exc:
            raise UsageError(f"cannot read package {local}: {exc.strerror or exc}") from exc
        uri = staging_uri(staging_bucket, digests.sha256, local.name)
        status: PlanStatus
        if not check_existing or store is None:
            status, reason = "unknown", "not checked"
        else:
            existing = store.stat(uri)
            if existing is None:
                status, reason = "upload", "not in the bucket yet"
            elif existing.matches(digests):
                status, reason = "reuse", "already in the bucket, checksum matches"
            else:
                status, reason = "upload", "in the bucket with other content; will be replaced"
        plans.append(UploadPlan(local, uri, digests.sha256, digests.size, status, reason, digests))
    return plans


def execute_uploads(
    plans: Iterable[UploadPlan],
    store: ObjectStore,
    *,
    progress_factory: ProgressFactory | None = None,
) -> list[UploadResult]:
    """Carry out a plan: reuse what matches, upload the rest; results in plan order."""
    return [_execute_one(plan, store, progress_factory) for plan in plans]


def _execute_one(plan: UploadPlan, store: ObjectStore, progress_factory: ProgressFactory | None) -> UploadResult:
    digests = _digests_as_planned(plan)
    if plan.status == "reuse" or (plan.status == "unknown" and _present(store, plan.uri, digests)):
        return UploadResult(plan.local, plan.uri, plan.sha256, plan.size, "reused", 0, 0.0)
    progress = progress_factory(plan) if progress_factory is not None else None
    started = time.monotonic()
    info = store.upload(plan.local, plan.uri, progress=progress, digests=digests)
    seconds = time.monotonic() - started
    if not info.matches(digests):
        # Changed during the upload itself. The next plan sees "other content" and replaces it.
        raise _changed(plan)
    if info.already_present:
        return UploadResult(plan.local, plan.uri, plan.sha256, plan.size, "reused", 0, seconds)
    return UploadResult(plan.local, plan.uri, plan.sha256, plan.size, "uploaded", plan.size, seconds)


def _digests_as_planned(plan: UploadPlan) -> LocalDigests:
    """The file's digests, provided it still holds the planned bytes: the object name promises
    them. Reuses the plan's when the file's state vouches for them, else hashes it again."""
    if plan.digests is not None and plan.digests.sha256 == plan.sha256 and plan.digests.still_describe(plan.local):
        return plan.digests
    try:
        digests = digest_file(plan.local)
    except OSError as exc:
        raise OperationalError(
            f"cannot read {plan.local} while staging it: {exc.strerror or exc}",
            hint="run the command again once nothing is moving or deleting the file",
        ) from exc
    if digests.sha256 != plan.sha256:
        raise _changed(plan)
    return digests


def _present(store: ObjectStore, uri: str, digests: LocalDigests) -> bool:
    existing = store.stat(uri)
    return existing is not None and existing.matches(digests)


def _changed(plan: UploadPlan) -> OperationalError:
    return OperationalError(
        f"{plan.local} changed while it was being staged (expected sha256 {plan.sha256[:12]}…)",
        hint="run the command again once nothing is writing to the file",
    )


def describe_result(result: UploadResult) -> str:
    """One line for the CLI: `reused gs://…` or `uploaded 1.2 MB in 0.3 s → gs://…`."""
    if result.action == "reused":
        return f"reused {result.uri}"
    return f"uploaded {human_size(result.bytes_sent)} in {result.seconds:.1f} s → {result.uri}"


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


# -- --packages --------------------------------------------------------------------------------


def check_package_entries(entries: Iterable[str]) -> list[Problem]:
    """Problems with --packages entries: malformed gs:// URIs, missing or non-file local paths,
    local files sharing a file name."""
    problems: list[Problem] = []
    remote, local = _split_entries(entries)
    for uri in remote:
        try:
            _, name = split_gs_uri(uri)
        except UsageError as exc:
            problems.append(Problem("--packages", exc.message, exc.hint))
            continue
        if not name or name.endswith("/"):
            problems.append(Problem("--packages", f"{uri} names a folder, not a package file",
                                    "give the full object name, e.g. gs://bucket/dist/pkg-1.0.tar.gz"))
        else:
            problems.extend(check_gs_uri("--packages", uri, need_object=True))
    for path in local:
        if not path.exists():
            problems.append(Problem("--packages", f"{path} does not exist",
                                    "list built archives (.tar.gz, .whl) or gs:// URIs, separated "
                                    "by commas"))
        elif not path.is_file():
            problems.append(Problem("--packages", f"{path} is not a file",
                                    "--packages takes built archives; use --package-path for a "
                                    "source directory"))

    problems.extend(check_duplicate_basenames(local))
    return problems


def classify_packages(entries: Iterable[str]) -> tuple[list[str], list[Path]]:
    """Split --packages into gs:// URIs (used as they are) and local files (to upload).

    Raises ValidationFailed listing every bad entry; call `check_package_entries` first to
    report them together with other problems.
    """
    entries = list(entries)
    problems = check_package_entries(entries)
    if problems:
        raise ValidationFailed(problems)
    return _split_entries(entries)


def _split_entries(entries: Iterable[str]) -> tuple[list[str], list[Path]]:
    remote: list[str] = []
    local: list[Path] = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue  # `--packages a.tar.gz,` leaves an empty item
        if entry.startswith("gs://"):
            remote.append(entry)
        else:
            local.append(Path(entry).expanduser())
    return remote, local
