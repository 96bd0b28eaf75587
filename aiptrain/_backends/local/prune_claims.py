"""What the jobs a prune leaves write to and use, compared however their paths are spelled.

A job's `--job-dir` and package URIs are text the user wrote: `gs://b/out`, `gs://b/out/`,
`gs://b//out` and `gs://b/./out/x/..` all name one folder of the local storage (the storage
endpoint and the trainers' file systems read them so). Each is compared here as its bucket and
its path segments after `.`, `..` and empty segments are resolved, and by containment: a job
writes to its folder and below, so a folder a prune would delete overlaps the folder of a job
that stays if either holds the other, and holds a package a staying job names if it is that file
or one of its folders.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from aiptrain._backends.local.store_records import JobRecord

# A gs:// path as compared here: its bucket, then its segments.
GsKey = tuple[str, ...]


def gs_key(uri: str) -> GsKey | None:
    """`gs://b/a/./c/../d/` -> ("b", "a", "d"); None when the text is not a gs:// URI with a bucket.
    `..` stops at the bucket: what it names is never outside it."""
    if not uri.startswith("gs://"):
        return None
    bucket, _, name = uri[len("gs://"):].partition("/")
    if not bucket:
        return None
    segments: list[str] = []
    for segment in name.split("/"):
        if segment == "..":
            if segments:
                segments.pop()
        elif segment not in ("", "."):
            segments.append(segment)
    return (bucket, *segments)


def _holds(outer: GsKey, inner: GsKey) -> bool:
    """Whether `inner` is `outer` or below it."""
    return inner[:len(outer)] == outer


@dataclass(frozen=True)
class Claim:
    """A path a staying job writes to (its job dir) or reads (a package), with why it matters."""

    key: GsKey
    uri: str  # as the job spells it
    is_job_dir: bool
    job: JobRecord

    def reason(self) -> str:
        what = "writes to" if self.is_job_dir else "runs the package"
        return f"job {self.job.job_id} (project {self.job.project}, {self.job.state.value}) {what} {self.uri}"

    def overlaps(self, key: GsKey) -> bool:
        """Whether deleting the file or folder `key` would delete or remove from under this claim."""
        if self.is_job_dir:
            return _holds(key, self.key) or _holds(self.key, key)
        return _holds(key, self.key)


def claims_of(records: Iterable[JobRecord]) -> list[Claim]:
    """The job dirs and packages of these jobs (the ones a prune leaves)."""
    claims: list[Claim] = []
    for record in records:
        training_input = record.job.training_input
        if training_input is None:
            continue
        for uri in training_input.package_uris or []:
            key = gs_key(uri)
            if key is not None:
                claims.append(Claim(key, uri, False, record))
        if training_input.job_dir:
            key = gs_key(training_input.job_dir)
            if key is not None:
                claims.append(Claim(key, training_input.job_dir, True, record))
    return claims


def first_claim_on(uri: str, claims: Iterable[Claim]) -> Claim | None:
    """The first claim deleting `uri` would break; None when nothing that stays needs it."""
    key = gs_key(uri)
    if key is None:
        return None
    return next((claim for claim in claims if claim.overlaps(key)), None)
