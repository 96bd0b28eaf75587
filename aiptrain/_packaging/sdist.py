"""Building the sdist: one PEP 517 `build_sdist` call in a subprocess, then a byte-reproducible rewrite.

The build runs on a temporary copy of the sources with the project's declared backend (setuptools'
legacy one for setup.py/setup.cfg projects); no virtualenv, no download. The archive is then
rewritten so identical sources give identical bytes: members sorted, mtime fixed, owner 0/0 without
names, modes 0644/0755, gzip header without file name and with mtime 0.
"""

from __future__ import annotations

# Only what a cache hit needs is imported at module level (see aiptrain/_packaging/__init__.py).
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from aiptrain._packaging.sources import SourceFile, file_sha256

# 2000-01-01T00:00:00Z: late enough for zip (wheels built from the sdist) in every time zone.
REPRODUCIBLE_MTIME = 946684800
_BUILD_TIMEOUT_SECONDS = 600
_OUTPUT_TAIL_LINES = 40
_LEGACY_BACKEND = "setuptools.build_meta:__legacy__"
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


def copy_sources(sources: Iterable[SourceFile], target: Path) -> None:
    import shutil

    target.mkdir(parents=True)
    for source in sources:
        destination = target / source.relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source.absolute, destination)
        destination.chmod(0o755 if source.executable else 0o644)


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


def run_build(copy_root: Path, out_dir: Path, *, root: Path, generated: bool) -> Path:
    import subprocess

    from aiptrain.errors import UsageError

    backend, backend_path = _build_backend(copy_root)
    environment = {
        **os.environ,
        "SOURCE_DATE_EPOCH": str(REPRODUCIBLE_MTIME),
        "PYTHONDONTWRITEBYTECODE": "1",
        # Its stdout and stderr share one pipe: unbuffered, a failing setup.py's error comes after
        # what it printed before, in the tail the user is shown, instead of ahead of it.
        "PYTHONUNBUFFERED": "1",
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


def normalize_into(sdist: Path, directory: Path, *, generated: bool) -> BuiltPackage:
    """Rewrite `sdist` into `directory` byte-reproducibly; describe the result."""
    import gzip
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
                    # Streamed block by block: a data file of hundreds of MB in the package must
                    # not be held in memory whole.
                    data = source.extractfile(member)
                    assert data is not None
                    info.size, info.mode = member.size, 0o755 if member.mode & 0o111 else 0o644
                    archive.addfile(info, data)
                    files.append(member.name)
                    if member.name.count("/") == 1 and member.name.endswith("/PKG-INFO"):
                        metadata = source.extractfile(member)
                        assert metadata is not None
                        pkg_info = metadata.read(1024 * 1024).decode("utf-8", errors="replace")
                elif member.issym():
                    info.type, info.mode, info.linkname = tarfile.SYMTYPE, 0o777, member.linkname
                    archive.addfile(info)
                    files.append(member.name)
    name, version = _name_and_version(pkg_info, sdist.name)
    return BuiltPackage(
        path=target,
        sha256=file_sha256(target),
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
