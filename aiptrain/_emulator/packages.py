"""Make a job's package URIs available to the local engine before it starts.

The engine reads `gs://BUCKET/PATH` from the local store (`<home>/storage/BUCKET/PATH`). When
the client staged its packages in a Cloud Storage emulator (STORAGE_EMULATOR_HOST set, as with
fake-gcs-server), they are downloaded into that local path first. Only `gs://` URIs with plain
relative object names are accepted, in packages, output directories and trainer arguments alike,
so no request can name a file outside the store.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from aiptrain._emulator.errors import ApiError
from aiptrain._emulator.schema import Violation
from aiptrain.errors import AiptrainError, NotFound, UsageError


def _checked_path(uri: str, storage_root: Path, field: str) -> Path:
    from aiptrain._storage.local import local_path_for

    if not uri.startswith("gs://"):
        raise _bad(field, f"{uri!r} is not a Cloud Storage URI (gs://BUCKET/PATH)")
    try:
        path = local_path_for(uri, storage_root)
    except UsageError as error:
        raise _bad(field, error.message) from None
    # Belt and braces: symlinks inside the store must not lead out of it either.
    root = storage_root.resolve()
    if not path.resolve().is_relative_to(root) or path.resolve() == root:
        raise _bad(field, f"{uri!r} does not name an object in the store")
    return path


def _bad(field: str, description: str) -> ApiError:
    return ApiError("INVALID_ARGUMENT", f"Field: {field} Error: {description}", (Violation(field, description),))


def check_output_dir(uri: str | None, storage_root: Path, *, field: str) -> None:
    """A job dir (or Vertex output directory) must be a gs:// location inside the store too."""
    if uri:
        _checked_path(uri, storage_root, field)


def check_args(args: Sequence[str] | None, *, field_prefix: str) -> None:
    """Trainer arguments that name gs:// locations must map into the store as well.

    The engine rewrites such arguments to local paths when the job starts (runner.gs_paths); a
    `..` there would only fail inside the running job, so it is refused here, with its index.
    """
    from aiptrain._job.limits import args_problems
    from aiptrain._replicas.gs_paths import unmappable_args

    for index, message in args_problems(args):
        raise _bad(field_prefix if index is None else f"{field_prefix}[{index}]", f"The argument {message}.")
    refused = unmappable_args(list(args or []))
    if refused:
        index, error = refused[0]
        raise _bad(f"{field_prefix}[{index}]", error.message)


def stage_packages(uris: Sequence[str], storage_root: Path, *, field_prefix: str) -> None:
    """Check every URI; fetch each from the GCS emulator when one is configured.

    A package that does not exist is left to the job, which fails the way it did on the service
    (the package cannot be installed); a storage emulator that cannot be reached is a 503.
    """
    paths = [_checked_path(uri, storage_root, f"{field_prefix}[{index}]") for index, uri in enumerate(uris)]
    if not os.environ.get("STORAGE_EMULATOR_HOST"):
        return
    from aiptrain._storage.gcs import GcsObjectStore

    store = GcsObjectStore()
    for uri, path in zip(uris, paths, strict=True):
        try:
            store.download(uri, path)
        except NotFound:
            continue
        except AiptrainError as error:
            raise ApiError("UNAVAILABLE", f"cannot fetch {uri} from the storage emulator: {error.message}") from None
