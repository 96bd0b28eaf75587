"""Installed packages shared by jobs: `$AIPTRAIN_HOME/cache/site/<key>/`.

Installing a trainer sdist takes a second or more (the installer's start-up, a wheel build, its
dependencies), most of a short job's PREPARING. The result depends only on what is installed and
where, so it is done once and reused:

    cache/site/<key>/site/            what the install put in the job's site directory
    cache/site/<key>/installed.json   what was installed, on what

On a runtime environment one entry holds a job's packages, installed in their order with their
dependencies (`packages_key`): its key hashes each package file's bytes and name in order, the
environment's key (its packages, day and interpreter) and the day the packages resolve as of, so a
job that moves its day installs again. With AIPTRAIN_LOCAL_PYTHON each package is an entry of its
own (`cache_key`): the package file's bytes and name and the interpreter (its path as given, which
tells virtual environments apart, and the identity of the binary behind it: a rebuilt or upgraded
Python is another key); packages installed into that interpreter's environment are not part of it,
since they change neither what pip unpacks nor what it compiles. Both carry `_CACHE_REVISION`.
Deleting the directory is always safe; the next job installs again, and entries unused for a month
are removed when a new one is added (`aiptrain.cache_eviction`).

An entry appears whole or not at all: pip installs into a temporary directory beside it, which
is renamed into place once complete. When two jobs install one package at once, the first
rename wins and the other job uses the winner's entry.

Jobs share an entry's files by content, not by copy: each job's `site` directory is made of its
own directories holding hard links to the entry's files (`link_into_site`), so two jobs of one
package take the disk of one. Why links and not the entry itself on PYTHONPATH:

- the job's directories are its own, so a file a trainer adds to its package directory (or a
  `__pycache__` the interpreter writes) lands in its job only, and a new job never sees it;
- the several entries of a job merge as pip would merge them into one --target, in order;
- a link keeps its file alive on its own, so removing an entry (eviction, `rm -r cache`) or
  pruning another job never takes a file from a job that uses it: no reference counts needed.

aiptrain never opens a linked file for writing, and the interpreter replaces bytecode by rename,
which leaves the entry's file alone. A trainer that rewrites a file of its package in place would
change the shared file; permission bits would not stop it (jobs often run as root) and would leak
into copies the trainer makes, so instead each entry records the size and mtime of its files when
it is published and is checked before each reuse: a changed entry is removed and installed again.
Where a link cannot be made (another file system), the file is copied.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aiptrain._cache_eviction import mark_used, remove_unused
from aiptrain._paths import HomeLayout

# Bump when the install command or the entry layout changes, so old entries are not reused.
_CACHE_REVISION = "2"
_MANIFEST = "installed.json"
_SITE = "site"
_STAGING_PREFIX = ".tmp-"
# Temporary directories of installs that were killed are removed after this long.
_STALE_STAGING_SECONDS = 24 * 3600
_HASH_BLOCK = 1024 * 1024


@dataclass(frozen=True)
class CachedInstall:
    """One complete entry of the cache."""

    key: str
    root: Path

    @property
    def site(self) -> Path:
        return self.root / _SITE


def install_cache_dir(home: Path) -> Path:
    """`$AIPTRAIN_HOME/cache/site`."""
    return HomeLayout(home).site_cache


def cache_key(package: Path, python: str) -> str:
    """The entry for installing `package` alone with the interpreter `python` (AIPTRAIN_LOCAL_PYTHON);
    reads the whole file."""
    identity = {
        "revision": _CACHE_REVISION,
        "package": package.name,
        "sha256": _file_digest(package),
        "python": interpreter_identity(python),
        "installer": "pip-no-deps",
    }
    return _key(identity)


def packages_key(packages: list[Path], environment_key: str, day: str) -> str:
    """The entry for installing `packages`, in this order, with their dependencies on the runtime
    environment `environment_key`, resolved as of `day`; reads every file."""
    identity = {
        "revision": _CACHE_REVISION,
        "packages": [[package.name, _file_digest(package)] for package in packages],
        "environment": environment_key,
        "day": day,
        "installer": "uv-on-runtime",
    }
    return _key(identity)


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _key(identity: Mapping[str, object]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]


def interpreter_identity(python: str) -> str:
    """The interpreter as given (absolute, symlinks kept: a venv's python is a symlink to its
    base one) plus the binary behind it, whose inode and mtime change when it is replaced."""
    located = os.path.abspath(shutil.which(python) or python)
    real = os.path.realpath(located)
    try:
        stat = os.stat(real)
        stamp = f"{stat.st_dev}:{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}"
    except OSError:
        stamp = "missing"  # pip will fail to start; the key does not matter then
    return f"{located}|{real}|{stamp}"


def lookup(cache_dir: Path, key: str) -> CachedInstall | None:
    """The complete, unchanged entry for `key` (now marked used), or None. A changed one (a
    trainer rewrote a linked file) is removed, so the install that follows can publish anew."""
    entry = CachedInstall(key, cache_dir / key)
    if not _is_complete(entry.root):
        return None
    if not _is_unchanged(entry):
        _remove_entry(entry.root)
        return None
    mark_used(entry.root)
    return entry


def new_staging(cache_dir: Path, key: str) -> Path:
    """An empty directory beside the entries (same file system, so publishing is a rename);
    pip installs into `<it>/site`."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale_staging(cache_dir)
    return Path(tempfile.mkdtemp(dir=cache_dir, prefix=f"{_STAGING_PREFIX}{key[:12]}-"))


def staging_site(staging: Path) -> Path:
    return staging / _SITE


def publish(staging: Path, cache_dir: Path, key: str, description: dict[str, str]) -> CachedInstall:
    """Make a finished install in `staging` the entry for `key`. If another job published one
    first, that one is kept and `staging` is left for the caller to discard."""
    manifest = {"key": key, **description, "fingerprint": _fingerprint(staging / _SITE)}
    (staging / _MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    entry = CachedInstall(key, cache_dir / key)
    for attempt in range(2):
        try:
            staging.rename(entry.root)
        except OSError:
            if _is_complete(entry.root):
                return entry  # another job got there first
            if attempt:
                raise
            # A damaged entry (ours always appear whole, so someone else's) is in the way.
            shutil.rmtree(entry.root, ignore_errors=True)
            continue
        remove_unused(cache_dir, keep=entry.root)
        return entry
    raise AssertionError("unreachable")


def discard(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)


def link_into_site(entries: list[CachedInstall], site_dir: Path) -> None:
    """Fill a job's site directory from its entries, in package order: its own directories,
    hard links to the entries' files (copies where links cannot be made).

    Directories merge and a later package's file replaces an earlier one's, as when pip installs
    several packages into one --target. A link is the entry's file itself, so its time, which
    pip's compiled bytecode is checked against, is kept.
    """
    site_dir.mkdir(parents=True, exist_ok=True)
    for entry in entries:
        _merge_tree(entry.site, site_dir)


def _merge_tree(source: Path, target: Path) -> None:
    for item in sorted(os.scandir(source), key=lambda e: e.name):
        destination = target / item.name
        if item.is_symlink():
            _remove(destination)
            os.symlink(os.readlink(item.path), destination)
        elif item.is_dir():
            if destination.is_symlink() or (destination.exists() and not destination.is_dir()):
                _remove(destination)
            destination.mkdir(exist_ok=True)
            _merge_tree(Path(item.path), destination)
        else:
            _remove(destination)
            try:
                os.link(item.path, destination)
            except OSError:  # another file system, or the file's link limit
                shutil.copy2(item.path, destination)


def _fingerprint(site: Path) -> str:
    """A digest of every file's path, size and mtime under `site`: a file rewritten in place
    changes its mtime, one deleted or added changes the list."""
    digest = hashlib.sha256()
    for directory, dirs, names in os.walk(site):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(directory, name)
            try:
                stat = os.lstat(path)
            except OSError:
                continue
            digest.update(f"{os.path.relpath(path, site)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _is_unchanged(entry: CachedInstall) -> bool:
    """Whether the entry's files are as published (entries from before fingerprints: trusted)."""
    try:
        recorded = json.loads((entry.root / _MANIFEST).read_text()).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return False
    return recorded is None or recorded == _fingerprint(entry.site)


def _remove_entry(root: Path) -> None:
    """Renamed aside first, so no job takes a half-removed entry for a complete one."""
    aside = root.with_name(f"{_STAGING_PREFIX}changed-{root.name}-{os.getpid()}")
    try:
        root.rename(aside)
    except OSError:
        return  # removed or replaced by another job meanwhile
    shutil.rmtree(aside, ignore_errors=True)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _is_complete(root: Path) -> bool:
    try:
        manifest = json.loads((root / _MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("key") == root.name and (root / _SITE).is_dir()


def _remove_stale_staging(cache_dir: Path) -> None:
    cutoff = time.time() - _STALE_STAGING_SECONDS
    for item in cache_dir.glob(f"{_STAGING_PREFIX}*"):
        try:
            if item.stat().st_mtime < cutoff:
                shutil.rmtree(item, ignore_errors=True)
        except OSError:
            pass  # removed by another job meanwhile
