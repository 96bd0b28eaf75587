"""Build the trainer's source distribution with setuptools: reproducible, cached, side-effect free.

gcloud semantics: `--package-path trainer/` names the package directory; the package root is its
parent. What aiptrain does differently, on purpose:

- The build runs on a temporary copy of the root, so the user's tree never gets an egg-info,
  a dist/ or a generated setup.py. The copy (and the cache key) skip caches, VCS metadata,
  virtualenvs, old build output and what `.gcloudignore` names (see `collect_sources`); gcloud
  ignores that file for training packages.
- The build is one PEP 517 `build_sdist` call in a subprocess of the current interpreter: the
  project's declared backend, or setuptools' legacy backend for setup.py/setup.cfg projects. No
  virtualenv, no download: the backend must already be importable.
- Without setup.py, setup.cfg or pyproject.toml, a setup.py is generated (in the copy only) that
  keeps subpackages (`find_packages(include=[name, name + ".*"])`; gcloud's drops them), ships
  every file under the package directory (a MANIFEST.in `graft`), and has the version
  `0.0.0+src<10 hex digits of the source hash>`, so each distinct source gets a distinct version.
  Only the package directory is copied, hashed and keyed then: nothing beside it would be
  installed, so data or notes next to it change neither the version nor the archive.
- The archive is rewritten to be byte-identical for identical sources: members sorted, mtime
  fixed at 2000-01-01 (a date every zip/wheel tool accepts), owner 0/0 without names, modes
  0644/0755, gzip header without file name and with mtime 0.
- Built archives are cached under `$AIPTRAIN_HOME/cache/sdist/<key>/`, keyed by the source tree
  (relative paths, contents, executable bit), the package name and the setuptools/Python
  versions: unchanged sources skip the build entirely. Entries unused for a month are removed
  (`aiptrain.cache_eviction`).

Modules: `sources` (checks and discovery), `ignore_file` (`.gcloudignore`), `setup_py` (the
generated setup.py), `sdist` (the build and its reproducible rewrite), `cache` (keys and
entries); `build_package` runs them.

May import: `errors`, `paths`, `cache_eviction`, `loopback` and this folder only: no job model, no backend.
"""

from __future__ import annotations

# Only what a cache hit needs is imported at module level, here and in every module of the
# package. A hit is the common case, and it is mostly interpreter start-up plus imports: the build
# path imports its modules where it runs, errors are imported where they are raised, and the
# records (BuiltPackage, SourceFile) are plain classes, because `dataclasses` alone takes longer
# to import than a whole cache hit takes to run.
import os
from pathlib import Path

from aiptrain._cache_eviction import mark_used, remove_unused
from aiptrain._packaging.cache import cache_key, default_cache_dir, load_cache_entry, make_dirs, publish
from aiptrain._packaging.sdist import REPRODUCIBLE_MTIME, BuiltPackage, copy_sources, normalize_into, run_build
from aiptrain._packaging.setup_py import write_generated_setup
from aiptrain._packaging.sources import (
    SETUP_FILES,
    check_duplicate_basenames,
    check_package_path,
    check_package_survives_ignore_file,
    collect_sources,
    source_digest,
)

__all__ = [
    "REPRODUCIBLE_MTIME",
    "BuiltPackage",
    "build_package",
    "check_duplicate_basenames",
    "check_package_path",
    "collect_sources",
]


def sweep_killed_builds(cache_dir: Path) -> None:
    """Remove what builds of submitters killed mid-build left: their copy of the sources in the
    temporary directory and their staging directory in the cache (by owner pid, see `leftovers`)."""
    from aiptrain._packaging.leftovers import SOURCES_PREFIX, STAGING_PREFIX, sweep_leftovers, temporary_directory

    sweep_leftovers(temporary_directory(), SOURCES_PREFIX)
    sweep_leftovers(cache_dir, STAGING_PREFIX)


def build_package(package_path: Path, *, cache_dir: Path | None = None) -> BuiltPackage:
    """Build (or fetch from the cache) the sdist of `package_path`'s parent directory."""
    problems = check_package_path(package_path)
    if problems:
        from aiptrain.errors import ValidationFailed

        raise ValidationFailed(problems)
    package_dir = Path(os.path.abspath(Path(package_path).expanduser()))
    root = package_dir.parent
    name = package_dir.name
    cache_dir = Path(os.path.abspath(cache_dir if cache_dir is not None else default_cache_dir()))

    generated = not any((root / setup_file).is_file() for setup_file in SETUP_FILES)
    # The generated setup installs only the package directory, so build from just that: then the
    # version (and the cache key) hash exactly what the archive holds, and a new file beside the
    # package (data/, NOTES.txt) makes neither a new version nor a new upload, nor is it read.
    sources = collect_sources(root, skip=[cache_dir], only=name if generated else None)
    check_package_survives_ignore_file(sources, name)
    digest = source_digest(sources)
    entry = cache_dir / cache_key(name, digest)

    sweep_killed_builds(cache_dir)
    cached = load_cache_entry(entry)
    if cached is not None:
        mark_used(entry)
        return cached

    import shutil
    import tempfile

    from aiptrain._packaging.leftovers import SOURCES_PREFIX, STAGING_PREFIX, owned_prefix

    make_dirs(cache_dir)
    with tempfile.TemporaryDirectory(prefix=owned_prefix(SOURCES_PREFIX)) as scratch:
        copy_root = Path(scratch) / "src"
        out_dir = Path(scratch) / "out"
        out_dir.mkdir()
        copy_sources(sources, copy_root)
        if generated:
            write_generated_setup(copy_root, name, f"0.0.0+src{digest[:10]}")
        sdist = run_build(copy_root, out_dir, root=root, generated=generated)
        staging = Path(tempfile.mkdtemp(dir=cache_dir, prefix=owned_prefix(STAGING_PREFIX)))
        try:
            built = normalize_into(sdist, staging, generated=generated)
            published = publish(staging, entry, built)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    remove_unused(cache_dir, keep=entry)
    return published
