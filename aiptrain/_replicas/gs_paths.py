"""gs:// in a trainer's command line, pointed at the local storage directory instead.

Used only with AIPTRAIN_LOCAL_GCS=rewrite: by default the replicas get their gs:// arguments
unchanged and reach them through the job's storage endpoint (`aiptrain.gcs_endpoint`).

On the local backend a bucket is a directory (`aiptrain._storage.local`), the way Vertex AI
mounts buckets under /gcs/. A value that is exactly a gs:// URI, or the value of a
`--flag=gs://...` argument, is rewritten; anything else (a URI inside a longer string, a
comma-separated list) is left alone, because guessing there could corrupt user data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aiptrain._storage.local import local_path_for
from aiptrain.errors import UsageError

GS_PREFIX = "gs://"


@dataclass(frozen=True)
class Rewrite:
    uri: str
    path: str


def local_location(value: str, storage_root: Path) -> str:
    """The local path of a gs:// URI (keeping a trailing slash); other values unchanged."""
    if not value.startswith(GS_PREFIX):
        return value
    path = str(local_path_for(value, storage_root))
    return path + "/" if value.endswith("/") and not path.endswith("/") else path


def rewrite_args(args: list[str], storage_root: Path) -> tuple[list[str], list[Rewrite]]:
    """Rewrite exact `gs://...` values and `--flag=gs://...` forms; report every change."""
    rewritten: list[str] = []
    changes: list[Rewrite] = []
    for arg in args:
        flag, equals, value = arg.partition("=")
        if arg.startswith(GS_PREFIX):
            path = local_location(arg, storage_root)
            rewritten.append(path)
            changes.append(Rewrite(arg, path))
        elif equals and flag.startswith("-") and value.startswith(GS_PREFIX):
            path = local_location(value, storage_root)
            rewritten.append(f"{flag}={path}")
            changes.append(Rewrite(value, path))
        else:
            rewritten.append(arg)
    return rewritten, changes


@dataclass(frozen=True)
class LocalCommandLine:
    """A trainer's arguments and job dir with gs:// pointed at local storage."""

    args: list[str]
    job_dir: str | None
    notes: list[str]  # one "Using local storage for ..." line per rewritten value


def localize(args: list[str], job_dir: str | None, storage_root: Path) -> LocalCommandLine:
    """`args` and `job_dir` as a replica on the local backend (or `local train`) sees them."""
    rewritten, changes = rewrite_args(args, storage_root)
    notes = [f"Using local storage for {change.uri}: {change.path}" for change in changes]
    local_dir = None
    if job_dir:
        local_dir = local_location(job_dir, storage_root)
        if job_dir.startswith(GS_PREFIX):
            notes.append(f"Using local storage for --job-dir {job_dir}: {local_dir}")
    return LocalCommandLine(rewritten, local_dir, notes)


def unmappable_args(args: list[str] | None) -> list[tuple[int, UsageError]]:
    """(index, why) of each argument `rewrite_args` would refuse, e.g. `gs://b/../x`.

    Submitters check this up front, so such a job is refused instead of failing when it starts.
    The mapping is a pure check of the URI: the root only prefixes the result.
    """
    refused = []
    for index, arg in enumerate(args or []):
        try:
            rewrite_args([arg], Path("storage"))
        except UsageError as error:
            refused.append((index, error))
    return refused
