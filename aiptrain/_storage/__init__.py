"""Object stores: GCS (google-cloud-storage) and the local directory the local backend uses.

May import: `errors`, `paths`, `cache_eviction`, `loopback` and this folder only. `gcs.py` is the only module
of aiptrain that imports google.cloud.storage, and only when a GCS store is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiptrain._storage.base import ObjectStore


def open_store(kind: str, *, project: str | None = None) -> ObjectStore:
    """The store packages are staged in: "local" ($AIPTRAIN_HOME/storage) or "gcs"."""
    if kind == "local":
        from aiptrain._storage.local import LocalObjectStore, default_storage_root

        return LocalObjectStore(default_storage_root())
    from aiptrain._storage.gcs import GcsObjectStore

    return GcsObjectStore(project=project)
