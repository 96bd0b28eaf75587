"""What aiptrain's local state takes on disk, part by part, with how each part is removed.

`aiptrain local disk-usage` prints it; the uninstall steps in docs/backends/local.md remove the
same parts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from aiptrain._backends.local.retention import tree_bytes
from aiptrain._paths import HomeLayout


@dataclass(frozen=True)
class DiskPart:
    name: str
    path: Path
    size: int
    removal: str  # how to get the space back


def uv_cache_dir() -> Path:
    """Where uv keeps its cache (the runtime environments are built with uv): UV_CACHE_DIR, else
    $XDG_CACHE_HOME/uv, else ~/.cache/uv."""
    if os.environ.get("UV_CACHE_DIR"):
        return Path(os.environ["UV_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "uv"


def usage(home: Path, build_cache: Path) -> list[DiskPart]:
    """The parts under `home`, the package build cache `build_cache` and uv's cache."""
    from aiptrain._environments.store import envs_dir

    layout = HomeLayout(home)
    database = layout.jobs_db
    store = sum(tree_bytes(path) for path in (database, database.with_name(f"{database.name}-wal"),
                                              database.with_name(f"{database.name}-shm")))
    return [
        DiskPart("job store (jobs, logs)", database, store, "aiptrain local prune --older-than 30d"),
        DiskPart("job directories", layout.jobs, tree_bytes(layout.jobs, unshared_only=True),
                 "aiptrain local prune"),  # the installed packages they link are the cache's
        DiskPart("local storage (gs://)", layout.storage, tree_bytes(layout.storage),
                 "aiptrain local prune --outputs; or delete objects under it"),
        DiskPart("runtime environments", envs_dir(home), tree_bytes(envs_dir(home)), "aiptrain local envs rm"),
        DiskPart("installed-package cache", layout.cache, tree_bytes(layout.cache), f"rm -r {layout.cache}"),
        DiskPart("package build cache", build_cache, tree_bytes(build_cache), f"rm -r {build_cache}"),
        DiskPart("uv cache", uv_cache_dir(), tree_bytes(uv_cache_dir()), "uv cache clean"),
    ]
