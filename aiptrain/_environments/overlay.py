"""The runtime's packages, shown to an installer as if they were installed in a job's site directory.

On the service, pip installed a trainer into the image: a requirement the image's packages met was
"already satisfied" and kept, one they did not meet was replaced (TensorFlow included). An
installer given `--target SITE` only looks at SITE, so before the trainer is installed SITE gets,
for every distribution of the runtime environment, a `NAME-VERSION.dist-info/` holding a copy of
its METADATA, a marker file and an empty RECORD (replacing one deletes no file, and no path in it
can point outside SITE). uv then decides exactly as pip did; afterwards the marked
directories are removed (`remove`), and what is left is what the trainer added.

Two runtime facts are written in: where a package's own metadata has a requirement uv cannot parse
(pandas before 0.25: `pytz (>=2011k)`), its requirements are the catalog's reading of them
(`dependency_metadata`); and an environment built with `tensorflow-cpu` also shows a `tensorflow`
of the same version (what the image had), so `tensorflow==2.1.0` in a setup.py of runtime 2.1 is met.
"""

from __future__ import annotations

import email.parser
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

MARKER = "aiptrain-runtime"
_CPU_BUILD = "tensorflow-cpu"


@dataclass(frozen=True)
class Replaced:
    """A runtime package the install replaced: its name, the runtime's version and the new one."""

    name: str
    runtime_version: str
    version: str


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def site_packages(environment_root: Path) -> list[Path]:
    """The environment's site-packages directories (one on Linux; purelib and platlib agree)."""
    return sorted({path.resolve() for path in environment_root.glob("lib/python*/site-packages")})


def write(site: Path, environment_root: Path, dependency_metadata: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Show the environment's distributions in `site`: what is shown, normalised name -> version."""
    site.mkdir(parents=True, exist_ok=True)
    fixes = {normalise(pin.partition("==")[0]) + "==" + pin.partition("==")[2]: list(requires)
             for pin, requires in dependency_metadata.items()}
    shown: dict[str, str] = {}
    cpu_build: tuple[str, str] | None = None
    for packages in site_packages(environment_root):
        for info in sorted(packages.glob("*.dist-info")):
            text = _metadata_text(info)
            name, version = _name_and_version(text or "")
            if text is None or not name:
                continue
            fixed = fixes.get(f"{normalise(name)}=={version}")
            _mark(site / info.name, _with_requirements(text, fixed) if fixed is not None else text)
            shown[normalise(name)] = version
            if normalise(name) == _CPU_BUILD:
                cpu_build = (version, text)
    if cpu_build is not None and "tensorflow" not in shown:
        version, text = cpu_build
        _mark(site / f"tensorflow-{version}.dist-info", re.sub(r"(?m)^Name: .*$", "Name: tensorflow", text, count=1))
        shown["tensorflow"] = version
    return shown


def remove(site: Path, shown: Mapping[str, str]) -> list[Replaced]:
    """Remove the marked directories; the runtime packages (of `shown`, what `write` showed) that
    the install replaced, each with the version that replaced it."""
    installed: dict[str, str] = {}
    for info in site.glob("*.dist-info"):
        if (info / MARKER).exists():
            shutil.rmtree(info, ignore_errors=True)
            continue
        name, version = _name_and_version(_metadata_text(info) or "")
        if name:
            installed[normalise(name)] = version
    return [Replaced(name, old, installed[name]) for name, old in sorted(shown.items())
            if name in installed and installed[name] != old]


def _mark(directory: Path, metadata: str) -> None:
    directory.mkdir(exist_ok=True)
    (directory / "METADATA").write_text(metadata, encoding="utf-8")
    (directory / "RECORD").touch()  # an uninstall by uv deletes nothing, and does not warn
    (directory / MARKER).touch()


def _metadata_text(info: Path) -> str | None:
    try:
        return (info / "METADATA").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _name_and_version(text: str) -> tuple[str, str]:
    headers = email.parser.HeaderParser().parsestr(text, headersonly=True)
    return str(headers.get("Name", "")).strip(), str(headers.get("Version", "")).strip()


def _with_requirements(text: str, requirements: Sequence[str]) -> str:
    """`text` (a METADATA) with its Requires-Dist lines replaced by `requirements`."""
    head, separator, body = text.partition("\n\n")
    lines = [line for line in head.splitlines() if not line.startswith("Requires-Dist:")]
    lines += [f"Requires-Dist: {requirement}" for requirement in requirements]
    return "\n".join(lines) + (separator + body if separator else "\n")


def remove_empty_directories(site: Path) -> None:
    for directory, _dirs, _files in sorted(os.walk(site), key=lambda item: len(item[0]), reverse=True):
        if directory != str(site):
            try:
                os.rmdir(directory)  # only when empty
            except OSError:
                pass
