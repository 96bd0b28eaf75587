"""Keeping `$AIPTRAIN_HOME/cache/*` from growing without end.

Both caches (built sdists, installed packages) get one directory per entry, and each edit of a
trainer adds one. An entry's directory mtime is refreshed whenever a build or job uses it; when a
new entry is added, entries unused for `AIPTRAIN_CACHE_MAX_AGE_DAYS` (default 30, 0 keeps
everything) are removed. The check costs one stat per entry and runs only on the slow path (a
build or an install), never on a cache hit.

Removing an entry is always safe: the next build or job that needs it makes it again. A job that
is using an entry has just refreshed it, so it is never the one removed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

MAX_AGE_SETTING = "AIPTRAIN_CACHE_MAX_AGE_DAYS"
_DEFAULT_MAX_AGE_DAYS = 30.0
_SECONDS_PER_DAY = 86400


def mark_used(entry: Path) -> None:
    """Record that `entry` was just used (its directory mtime), so it is kept."""
    try:
        os.utime(entry)
    except OSError:
        pass  # a read-only cache still works; its entries just age


def remove_unused(cache_dir: Path, *, keep: Path | None = None) -> list[Path]:
    """Remove the entries of `cache_dir` unused for longer than the configured age; return them.

    Names starting with a dot (the caches' in-progress directories) are left to their owners.
    """
    max_age_days = configured_max_age_days()
    if max_age_days == 0:
        return []
    import shutil

    cutoff = time.time() - max_age_days * _SECONDS_PER_DAY
    removed: list[Path] = []
    try:
        candidates = list(os.scandir(cache_dir))
    except OSError:
        return removed
    for item in candidates:
        if item.name.startswith(".") or (keep is not None and item.path == str(keep)):
            continue
        try:
            if not item.is_dir(follow_symlinks=False) or item.stat().st_mtime >= cutoff:
                continue
        except OSError:
            continue  # removed by another process meanwhile
        shutil.rmtree(item.path, ignore_errors=True)
        removed.append(Path(item.path))
    return removed


def configured_max_age_days() -> float:
    raw = os.environ.get(MAX_AGE_SETTING, "").strip()
    if not raw:
        return _DEFAULT_MAX_AGE_DAYS
    import math

    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (value >= 0 and math.isfinite(value)):  # negative, NaN or infinite
        from aiptrain.errors import UsageError

        raise UsageError(f"{MAX_AGE_SETTING}={raw!r} is not a number of days",
                         hint=f"set {MAX_AGE_SETTING} to e.g. 30, or 0 to keep every cache entry")
    return value
