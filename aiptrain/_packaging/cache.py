"""The build cache: `$AIPTRAIN_HOME/cache/sdist/<key>/`, one finished build per entry.

The key covers the source digest, the package name and the setuptools/Python versions, so
unchanged sources skip the build entirely. Entries are published by an atomic rename; a damaged
one is treated as missing. Entries unused for a month are removed (`aiptrain.cache_eviction`).
"""

from __future__ import annotations

# Only what a cache hit needs is imported at module level (see aiptrain/_packaging/__init__.py).
import hashlib
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from aiptrain._packaging.sdist import BuiltPackage
from aiptrain._packaging.sources import file_sha256
from aiptrain._paths import HomeLayout

# Bump when the build or normalisation changes, so old cache entries are not reused.
_BUILDER_REVISION = "2"


def default_cache_dir() -> Path:
    return HomeLayout.of().sdist_cache


def cache_key(name: str, digest: str) -> str:
    identity = {
        "builder": _BUILDER_REVISION,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "setuptools": setuptools_version(),
        "package": name,
        "sources": digest,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]


def setuptools_version() -> str:
    """The version of the setuptools a build would import, for the cache key.

    `importlib.metadata` answers this, but importing it costs more than the rest of a cache hit
    together; the metadata of the installed distribution, found the way `importlib.metadata`
    finds it (the first `setuptools-*.dist-info` or `.egg-info` along sys.path), says the same
    thing for a few `listdir` calls. Any layout the scan does not understand (zipped eggs,
    custom finders) falls back to `importlib.metadata`.
    """
    version = setuptools_version_on_path(sys.path)
    if version is not None:
        return version
    import importlib.metadata

    try:
        return importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def setuptools_version_on_path(entries: Iterable[str]) -> str | None:
    for entry in entries:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue  # a zip file, a missing directory, ...
        for name in names:
            stem, dot, kind = name.rpartition(".")
            if not dot or kind not in ("dist-info", "egg-info"):
                continue
            if stem.partition("-")[0].lower() != "setuptools":
                continue
            metadata = "METADATA" if kind == "dist-info" else "PKG-INFO"
            version = _metadata_version(Path(entry or ".", name, metadata), "setuptools")
            if version is not None:
                return version
    return None


def _metadata_version(path: Path, project: str) -> str | None:
    """`Version` from a core-metadata file whose `Name` is `project`, reading only the headers."""
    name = version = None
    try:
        with path.open(encoding="utf-8", errors="replace") as stream:
            for line in stream:
                if not line.strip():
                    break  # the headers end at the first blank line
                key, _, value = line.partition(":")
                if key == "Name":
                    name = value.strip()
                elif key == "Version":
                    version = value.strip()
    except OSError:
        return None
    normalized = (name or "").lower().replace("_", "-").replace(".", "-")
    return version if normalized == project and version else None


_MANIFEST = "manifest.json"


def publish(staging: Path, entry: Path, built: BuiltPackage) -> BuiltPackage:
    """Move a finished build into the cache. Renaming a complete directory into place is atomic,
    so concurrent builders never see half an entry; if another one got there first, its
    (byte-identical) entry is kept."""
    manifest = {
        "file": built.path.name,
        "sha256": built.sha256,
        "size": built.size,
        "name": built.name,
        "version": built.version,
        "generated_setup": built.generated_setup,
        "files": built.files,
    }
    import shutil

    from aiptrain.errors import OperationalError

    (staging / _MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    try:
        staging.rename(entry)
    except OSError:
        if load_cache_entry(entry) is None:
            # A broken entry is in the way: replace it.
            shutil.rmtree(entry, ignore_errors=True)
            try:
                staging.rename(entry)
            except OSError as exc:
                raise OperationalError(
                    f"cannot write the build cache at {entry}: {exc.strerror or exc}",
                    hint="check that $AIPTRAIN_HOME is writable",
                ) from exc
    return BuiltPackage(
        path=entry / built.path.name,
        sha256=built.sha256,
        size=built.size,
        name=built.name,
        version=built.version,
        reused_from_cache=False,
        generated_setup=built.generated_setup,
        files=built.files,
    )


def load_cache_entry(entry: Path) -> BuiltPackage | None:
    """The cached build in `entry`, or None if there is none or it is damaged."""
    try:
        manifest = json.loads((entry / _MANIFEST).read_text())
        path = entry / manifest["file"]
        if file_sha256(path) != manifest["sha256"]:
            return None
        return BuiltPackage(
            path=path,
            sha256=manifest["sha256"],
            size=int(manifest["size"]),
            name=manifest["name"],
            version=manifest["version"],
            reused_from_cache=True,
            generated_setup=bool(manifest["generated_setup"]),
            files=list(manifest["files"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def make_dirs(directory: Path) -> None:
    from aiptrain.errors import OperationalError

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OperationalError(
            f"cannot create the build cache {directory}: {exc.strerror or exc}",
            hint="set AIPTRAIN_HOME to a writable directory",
        ) from exc
