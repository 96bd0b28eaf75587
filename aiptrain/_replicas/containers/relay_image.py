"""The image of the network owners: the Python that runs aiptrain, with only what the relay loads.

No registry is asked for it: it is made here, once per engine, from this machine's interpreter
(its binary, the standard library modules `relay_program` loads, the shared libraries `ldd` finds
for them and the dynamic loader, each at its path on this machine, so the interpreter finds its
prefix as it does here) and imported as an image (`import` of a tar stream: a second, no build
context, no builder). Its tag holds a digest of all of that, so a changed interpreter or relay
makes a new image, and an existing one is used as it is.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

from aiptrain._replicas.containers import relay_program
from aiptrain._replicas.containers.container_engine import ContainerEngine, EngineCallFailed, engine_message

RELAY_REPOSITORY = "aiptrain-relay"
PROGRAM_INSIDE = "/aiptrain-relay.py"


def relay_python() -> Path:
    """The interpreter behind this one (a virtual environment's base), which the image copies."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return Path(base).resolve()


def _python_files(python: Path) -> list[Path]:
    """The files the relay program loads when run by `python` (its modules, then their libraries)."""
    listed = subprocess.run([str(python), "-I", "-S", relay_program.__file__, "--modules"], capture_output=True,
                            text=True, timeout=60, check=True).stdout.split()
    program = Path(relay_program.__file__).resolve()
    modules = sorted({Path(path) for path in listed if Path(path).is_file() and Path(path).resolve() != program})
    return [python, *modules]


def shared_libraries(binaries: list[Path]) -> list[Path]:
    """The shared libraries `ldd` resolves for the ELF files among `binaries`, the loader included."""
    elves = [path for path in binaries if ".so" in path.name or path == binaries[0]]
    done = subprocess.run(["ldd", *map(str, elves)], capture_output=True, text=True, timeout=60, check=False)
    found: set[Path] = set()
    for line in done.stdout.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) > parts.index("=>") + 1 and parts[parts.index("=>") + 1].startswith("/"):
            found.add(Path(parts[parts.index("=>") + 1]))
        elif len(parts) == 2 and parts[0].startswith("/") and parts[1].startswith("(0x"):
            found.add(Path(parts[0]))  # the dynamic loader, named by its own path
    return sorted(found)


def _rootfs_files() -> list[Path]:
    python = relay_python()
    files = _python_files(python)
    return files + shared_libraries(files)


def relay_tag() -> str:
    """The image's tag: a digest of the relay program and the interpreter (its path, size, time
    and version), cheap enough to ask for every job; the files are gathered only to make it."""
    python = relay_python()
    info = python.stat()
    digest = hashlib.sha256(Path(relay_program.__file__).read_bytes())
    digest.update(f"{python}\0{info.st_size}\0{info.st_mtime_ns}\0{sys.version}".encode())
    return f"{RELAY_REPOSITORY}:{digest.hexdigest()[:16]}"


def add_file(archive: tarfile.TarFile, source: Path, name: str) -> None:
    """`source` (symlinks followed) at `name`, with every directory above it."""
    parts = Path(name.lstrip("/")).parts
    for depth in range(1, len(parts)):
        directory = "/".join(parts[:depth])
        if directory not in archive.getnames():
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            archive.addfile(info)
    info = archive.gettarinfo(str(source.resolve()), arcname="/".join(parts))
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    with open(source, "rb") as content:
        archive.addfile(info, content)


def _rootfs_tar(files: list[Path]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path in files:
            add_file(archive, path, str(path))
        add_file(archive, Path(relay_program.__file__), PROGRAM_INSIDE)
        tmp = tarfile.TarInfo("tmp")
        tmp.type, tmp.mode = tarfile.DIRTYPE, 0o1777
        archive.addfile(tmp)
    return buffer.getvalue()


def ensure_relay_image(engine: ContainerEngine) -> str:
    """The relay image's tag on `engine`, imported first if it is not there yet."""
    tag = relay_tag()
    if engine.run(["image", "inspect", "--format", "{{.Id}}", tag], check=False).returncode == 0:
        return tag
    try:
        files = _rootfs_files()
    except (OSError, subprocess.SubprocessError) as error:
        raise EngineCallFailed(f"the relay image cannot be made from {relay_python()}: {error}") from None
    entrypoint = json.dumps([str(files[0]), "-I", "-S", PROGRAM_INSIDE])
    done = engine.run(["import", "--change", f"ENTRYPOINT {entrypoint}", "--change", "ENV PYTHONUNBUFFERED=1",
                       "-", tag], input=_rootfs_tar(files), check=False, timeout=300)
    if done.returncode != 0:
        raise EngineCallFailed(f"{engine.name} could not import the relay image {tag}: {engine_message(done.stderr)}")
    return tag
