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
"""

from __future__ import annotations

# Only what a cache hit needs is imported here. A hit is the common case, and it is mostly
# interpreter start-up plus imports: the build path imports its modules where it runs, errors
# are imported where they are raised, and the records below are plain classes, because
# `dataclasses` alone takes longer to import than a whole cache hit takes to run.
import hashlib
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from aiptrain.cache_eviction import mark_used, remove_unused
from aiptrain.paths import aiptrain_home

# `typing.TYPE_CHECKING` without importing typing (mypy knows the name): for annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from aiptrain.errors import Problem

# Bump when the build or normalisation changes, so old cache entries are not reused.
_BUILDER_REVISION = "2"
# 2000-01-01T00:00:00Z: late enough for zip (wheels built from the sdist) in every time zone.
REPRODUCIBLE_MTIME = 946684800
_BUILD_TIMEOUT_SECONDS = 600
_OUTPUT_TAIL_LINES = 40
# A package root with more files than this is almost certainly not a trainer project.
MAX_SOURCE_FILES = 50_000

_SETUP_FILES = ("setup.py", "setup.cfg", "pyproject.toml")
_LEGACY_BACKEND = "setuptools.build_meta:__legacy__"
# Directory names skipped anywhere in the tree.
_SKIPPED_DIRS = frozenset({
    "__pycache__", ".git", ".hg", ".svn", ".tox", ".nox", ".venv", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", ".eggs",
})
# Directory names skipped only at the top of the root: setuptools' own output.
_SKIPPED_TOP_DIRS = frozenset({"build", "dist"})
_SKIPPED_FILE_SUFFIXES = (".pyc", ".pyo")
_SKIPPED_FILES = frozenset({".DS_Store"})
_BACKEND_MISSING_EXIT = 97


class BuiltPackage:
    """A built sdist: where it is, its identity, and how it came to be. Compared by value."""

    __slots__ = ("files", "generated_setup", "name", "path", "reused_from_cache", "sha256", "size", "version")

    def __init__(
        self,
        path: Path,
        sha256: str,
        size: int,
        name: str,
        version: str,
        reused_from_cache: bool,
        generated_setup: bool,
        files: list[str] | None = None,
    ) -> None:
        self.path = path
        self.sha256 = sha256
        self.size = size
        self.name = name
        self.version = version
        self.reused_from_cache = reused_from_cache
        self.generated_setup = generated_setup
        self.files: list[str] = files if files is not None else []  # archive members, sorted

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BuiltPackage) and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # compared by value and mutable (files): unhashable

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"BuiltPackage({values})"


class SourceFile:
    """One file of the package root."""

    __slots__ = ("absolute", "executable", "relative")

    def __init__(self, relative: str, absolute: Path, executable: bool) -> None:
        self.relative = relative  # POSIX path under the package root
        self.absolute = absolute
        self.executable = executable


def default_cache_dir() -> Path:
    return aiptrain_home() / "cache" / "sdist"


# -- checks ------------------------------------------------------------------------------------


def _problem(path: str, message: str, hint: str | None = None) -> Problem:
    from aiptrain.errors import Problem

    return Problem(path, message, hint)


def check_package_path(path: Path | str) -> list[Problem]:
    """Everything wrong with a --package-path, without building anything."""
    flag = "--package-path"
    package_dir = Path(os.path.abspath(Path(path).expanduser()))
    if not package_dir.exists():
        return [_problem(flag, f"{package_dir} does not exist",
                         "point --package-path at your trainer package directory, e.g. trainer/")]
    if not package_dir.is_dir():
        return [_problem(flag, f"{package_dir} is not a directory",
                         "--package-path names the package directory (the one with __init__.py), "
                         "not a module or an archive; pass archives with --packages")]
    problems: list[Problem] = []
    if package_dir.parent == package_dir:
        return [_problem(flag, "the package directory cannot be the filesystem root",
                         "move the trainer package into a project directory")]
    if not (package_dir / "__init__.py").is_file():
        problems.append(_problem(
            flag,
            f"{package_dir} is not a Python package: it has no __init__.py",
            _missing_init_hint(package_dir),
        ))
    root = package_dir.parent
    if not any((root / name).is_file() for name in _SETUP_FILES) and not package_dir.name.isidentifier():
        problems.append(_problem(
            flag,
            f"{package_dir.name!r} is not a valid Python package name, so `python -m "
            f"{package_dir.name}.task` could not import it",
            f"rename the directory (letters, digits and underscores), or add a setup.py in {root}",
        ))
    return problems


def _missing_init_hint(package_dir: Path) -> str:
    create = f"create {package_dir / '__init__.py'} (it may be empty)"
    nested = sorted(p.parent for p in package_dir.glob("*/__init__.py"))
    own_modules = [p for p in package_dir.glob("*.py") if p.name != "setup.py"]
    looks_like_project = any((package_dir / name).is_file() for name in _SETUP_FILES)
    if nested and (looks_like_project or not own_modules):
        # Pointed at the project directory instead of the package inside it.
        return (f"--package-path must point at the package directory itself; did you mean "
                f"--package-path {nested[0]}? Otherwise {create}")
    return (f"{create}; --package-path must point at the package directory itself, e.g. "
            "trainer/, not at its parent")


def check_duplicate_basenames(files: Iterable[Path | str]) -> list[Problem]:
    """Two packages with one file name would land on the same object name (gcloud refuses too)."""
    by_name: dict[str, list[str]] = {}
    for file in files:
        by_name.setdefault(Path(file).name, []).append(str(file))
    return [
        _problem("--packages", f"cannot upload multiple packages with the same file name: {name}",
                 f"rename one of {', '.join(paths)}")
        for name, paths in sorted(by_name.items())
        if len(paths) > 1
    ]


# -- build -------------------------------------------------------------------------------------


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

    generated = not any((root / setup_file).is_file() for setup_file in _SETUP_FILES)
    # The generated setup installs only the package directory, so build from just that: then the
    # version (and the cache key) hash exactly what the archive holds, and a new file beside the
    # package (data/, NOTES.txt) makes neither a new version nor a new upload, nor is it read.
    sources = collect_sources(root, skip=[cache_dir], only=name if generated else None)
    _check_package_survives_ignore_file(sources, name)
    digest = source_digest(sources)
    entry = cache_dir / _cache_key(name, digest)

    cached = _load_cache_entry(entry)
    if cached is not None:
        mark_used(entry)
        return cached

    import shutil
    import tempfile

    _make_dirs(cache_dir)
    with tempfile.TemporaryDirectory(prefix="aiptrain-build-") as scratch:
        copy_root = Path(scratch) / "src"
        out_dir = Path(scratch) / "out"
        out_dir.mkdir()
        _copy_sources(sources, copy_root)
        if generated:
            _write_generated_setup(copy_root, name, f"0.0.0+src{digest[:10]}")
        sdist = _run_build(copy_root, out_dir, root=root, generated=generated)
        staging = Path(tempfile.mkdtemp(dir=cache_dir, prefix=".tmp-"))
        try:
            built = _normalize_into(sdist, staging, generated=generated)
            published = _publish(staging, entry, built)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    remove_unused(cache_dir, keep=entry)
    return published


def collect_sources(root: Path, *, skip: Iterable[Path] = (), only: str | None = None) -> list[SourceFile]:
    """The files under `root` that make up the project, sorted by relative path.

    With `only`, just that top-level directory of `root` is walked (`root`'s `.gcloudignore`
    still applies).

    Skipped: VCS metadata, caches, virtualenvs (any directory holding a pyvenv.cfg), egg-info
    directories, compiled bytecode, setuptools' top-level build/ and dist/, and whatever the
    root's `.gcloudignore` names (see `aiptrain.ignore_file`). Symlinked files and directories
    are followed (each real directory once).
    """
    from aiptrain.ignore_file import load_ignore_file

    ignored = load_ignore_file(root)
    skipped = {Path(os.path.abspath(p)) for p in skip}
    files: list[SourceFile] = []
    seen_dirs: set[str] = set()
    for current, dirnames, filenames in os.walk(root, followlinks=True):
        here = Path(current)
        real = os.path.realpath(here)
        if real in seen_dirs:
            dirnames[:] = []
            continue
        seen_dirs.add(real)
        top = here == root
        prefix = "" if top else here.relative_to(root).as_posix() + "/"
        dirnames[:] = sorted(
            d for d in dirnames
            if not (top and only is not None and d != only)
            and d not in _SKIPPED_DIRS
            and not d.endswith(".egg-info")
            and not (top and d in _SKIPPED_TOP_DIRS)
            and not (here / d / "pyvenv.cfg").exists()
            and (here / d) not in skipped
            and not (ignored and ignored(prefix + d, True))
        )
        for filename in filenames:
            if (top and only is not None) or filename in _SKIPPED_FILES \
                    or filename.endswith(_SKIPPED_FILE_SUFFIXES):
                continue
            path = here / filename
            relative = prefix + filename
            if not path.is_file() or (ignored and ignored(relative, False)):
                continue  # dangling symlink, socket, ..., or named in .gcloudignore
            executable = bool(path.stat().st_mode & 0o111)
            files.append(SourceFile(relative, path, executable))
        if len(files) > MAX_SOURCE_FILES:
            from aiptrain.errors import UsageError

            raise UsageError(
                f"the package root {root} holds more than {MAX_SOURCE_FILES} files",
                hint="the package root is the parent of --package-path; move the trainer "
                "package into a directory of its own",
            )
    return sorted(files, key=lambda f: f.relative)


def _check_package_survives_ignore_file(sources: list[SourceFile], name: str) -> None:
    """check_package_path saw an __init__.py on disk; only .gcloudignore can have dropped it."""
    init = f"{name}/__init__.py"
    if not any(source.relative == init for source in sources):
        from aiptrain.errors import ValidationFailed
        from aiptrain.ignore_file import IGNORE_FILE_NAME

        raise ValidationFailed([_problem(
            IGNORE_FILE_NAME,
            f"it excludes {init}, so the package would not contain the trainer",
            f"remove the pattern that matches {name}/ or {init}, or add `!{init}` after it",
        )])


def source_digest(sources: Iterable[SourceFile]) -> str:
    """sha256 over relative paths, executable bits and file contents."""
    digest = hashlib.sha256()
    for source in sources:
        try:
            content = _file_sha256(source.absolute)
        except OSError as exc:
            from aiptrain.errors import UsageError

            raise UsageError(f"cannot read {source.absolute}: {exc.strerror or exc}") from exc
        mode = "x" if source.executable else "-"
        digest.update(f"{source.relative}\0{mode}\0{content}\n".encode())
    return digest.hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(1024 * 1024):
            digest.update(block)
    return digest.hexdigest()


def _cache_key(name: str, digest: str) -> str:
    identity = {
        "builder": _BUILDER_REVISION,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "setuptools": _setuptools_version(),
        "package": name,
        "sources": digest,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]


def _setuptools_version() -> str:
    """The version of the setuptools a build would import, for the cache key.

    `importlib.metadata` answers this, but importing it costs more than the rest of a cache hit
    together; the metadata of the installed distribution, found the way `importlib.metadata`
    finds it (the first `setuptools-*.dist-info` or `.egg-info` along sys.path), says the same
    thing for a few `listdir` calls. Any layout the scan does not understand (zipped eggs,
    custom finders) falls back to `importlib.metadata`.
    """
    version = _setuptools_version_on_path(sys.path)
    if version is not None:
        return version
    import importlib.metadata

    try:
        return importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _setuptools_version_on_path(entries: Iterable[str]) -> str | None:
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


def _copy_sources(sources: Iterable[SourceFile], target: Path) -> None:
    import shutil

    target.mkdir(parents=True)
    for source in sources:
        destination = target / source.relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source.absolute, destination)
        destination.chmod(0o755 if source.executable else 0o644)


def _write_generated_setup(root: Path, name: str, version: str) -> None:
    (root / "setup.py").write_text(
        "# Generated by aiptrain: the package root had no setup.py, setup.cfg or pyproject.toml.\n"
        "from setuptools import find_packages, setup\n\n"
        "setup(\n"
        f"    name={name!r},\n"
        f"    version={version!r},\n"
        f"    packages=find_packages(include=[{name!r}, {name + '.*'!r}]),\n"
        "    include_package_data=True,\n"
        ")\n"
    )
    manifest = root / "MANIFEST.in"
    if not manifest.exists():
        manifest.write_text(f"graft {name}\nglobal-exclude *.py[cod]\n")


# Runs in the build subprocess: import the PEP 517 backend and build the sdist.
_BUILD_SCRIPT = """
import importlib, sys
spec, out, *backend_path = sys.argv[1:]
sys.path[:0] = backend_path
module_name, _, attributes = spec.partition(":")
try:
    backend = importlib.import_module(module_name)
except ImportError as exc:
    print(f"cannot import build backend {spec!r}: {exc}", file=sys.stderr)
    sys.exit(BACKEND_MISSING_EXIT)
for attribute in filter(None, attributes.split(".")):
    backend = getattr(backend, attribute)
print("aiptrain-sdist:", backend.build_sdist(out))
""".replace("BACKEND_MISSING_EXIT", str(_BACKEND_MISSING_EXIT))


def _build_backend(root: Path) -> tuple[str, list[str]]:
    """The PEP 517 backend (and backend-path) the project declares, setuptools' legacy one if none."""
    import tomllib

    from aiptrain.errors import UsageError

    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return _LEGACY_BACKEND, []
    try:
        config = tomllib.loads(pyproject.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{pyproject} is not valid TOML: {exc}") from exc
    build_system = config.get("build-system", {})
    backend = build_system.get("build-backend") or _LEGACY_BACKEND
    paths = [str(root / p) for p in build_system.get("backend-path", [])]
    return str(backend), paths


def _run_build(copy_root: Path, out_dir: Path, *, root: Path, generated: bool) -> Path:
    import subprocess

    from aiptrain.errors import UsageError

    backend, backend_path = _build_backend(copy_root)
    environment = {
        **os.environ,
        "SOURCE_DATE_EPOCH": str(REPRODUCIBLE_MTIME),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    try:
        completed = subprocess.run(
            [sys.executable, "-c", _BUILD_SCRIPT, backend, str(out_dir), *backend_path],
            cwd=copy_root,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=_BUILD_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise UsageError(
            f"building the package in {root} took more than {_BUILD_TIMEOUT_SECONDS} s",
            hint="check setup.py for network access or prompts",
        ) from exc
    output = completed.stdout.decode(errors="replace")
    sdists = sorted(out_dir.glob("*.tar.gz"))
    if completed.returncode == _BACKEND_MISSING_EXIT:
        raise UsageError(
            f"cannot build {root}: its build backend {backend!r} is not installed",
            hint=f"install it next to aiptrain ({sys.executable} -m pip install ...), or build the "
            "archive yourself and pass it with --packages",
        )
    if completed.returncode != 0 and "No distribution was found" not in output:
        raise UsageError(
            f"packaging the trainer in {root} failed (exit {completed.returncode}):\n"
            + _tail(output),
            hint=_failure_hint(root, generated),
        )
    if len(sdists) != 1:
        raise UsageError(
            f"building {root} produced {'no' if not sdists else 'more than one'} .tar.gz sdist"
            + (f":\n{_tail(output)}" if output.strip() else ""),
            hint="make sure setup.py calls setup() unconditionally (gcloud-style "
            "`if __name__ == '__main__':` guards are fine)",
        )
    return sdists[0]


def _tail(output: str) -> str:
    lines = output.rstrip().splitlines()[-_OUTPUT_TAIL_LINES:]
    return "\n".join(f"  | {line}" for line in lines)


def _failure_hint(root: Path, generated: bool) -> str:
    if generated:
        return f"write a setup.py in {root} that fits the package and run again"
    python = Path(sys.executable).name
    command = (f"{python} setup.py sdist" if (root / "setup.py").is_file()
               else f"{python} -m build --sdist --no-isolation")
    return (f"run `{command}` in {root} to debug it, or build the archive yourself and pass it "
            "with --packages")


# -- normalisation and cache -------------------------------------------------------------------


def _normalize_into(sdist: Path, directory: Path, *, generated: bool) -> BuiltPackage:
    """Rewrite `sdist` into `directory` byte-reproducibly; describe the result."""
    import gzip
    import io
    import tarfile

    target = directory / sdist.name
    files: list[str] = []
    pkg_info: str | None = None
    with tarfile.open(sdist, "r:*") as source:
        members = sorted(source.getmembers(), key=lambda m: m.name)
        with target.open("wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as zipped, \
                tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for member in members:
                info = tarfile.TarInfo(member.name)
                info.mtime = REPRODUCIBLE_MTIME
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if member.isdir():
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    archive.addfile(info)
                elif member.isfile():
                    data = source.extractfile(member)
                    assert data is not None
                    content = data.read()
                    info.size, info.mode = len(content), 0o755 if member.mode & 0o111 else 0o644
                    archive.addfile(info, io.BytesIO(content))
                    files.append(member.name)
                    if member.name.count("/") == 1 and member.name.endswith("/PKG-INFO"):
                        pkg_info = content.decode("utf-8", errors="replace")
                elif member.issym():
                    info.type, info.mode, info.linkname = tarfile.SYMTYPE, 0o777, member.linkname
                    archive.addfile(info)
                    files.append(member.name)
    name, version = _name_and_version(pkg_info, sdist.name)
    return BuiltPackage(
        path=target,
        sha256=_file_sha256(target),
        size=target.stat().st_size,
        name=name,
        version=version,
        reused_from_cache=False,
        generated_setup=generated,
        files=files,
    )


def _name_and_version(pkg_info: str | None, filename: str) -> tuple[str, str]:
    from email.parser import HeaderParser

    if pkg_info is not None:
        headers = HeaderParser().parsestr(pkg_info)
        if headers.get("Name") and headers.get("Version"):
            return str(headers["Name"]), str(headers["Version"])
    stem = filename.removesuffix(".tar.gz")
    name, _, version = stem.rpartition("-")
    return name or stem, version


_MANIFEST = "manifest.json"


def _publish(staging: Path, entry: Path, built: BuiltPackage) -> BuiltPackage:
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
        if _load_cache_entry(entry) is None:
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


def _load_cache_entry(entry: Path) -> BuiltPackage | None:
    """The cached build in `entry`, or None if there is none or it is damaged."""
    try:
        manifest = json.loads((entry / _MANIFEST).read_text())
        path = entry / manifest["file"]
        if _file_sha256(path) != manifest["sha256"]:
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


def _make_dirs(directory: Path) -> None:
    from aiptrain.errors import OperationalError

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OperationalError(
            f"cannot create the build cache {directory}: {exc.strerror or exc}",
            hint="set AIPTRAIN_HOME to a writable directory",
        ) from exc
