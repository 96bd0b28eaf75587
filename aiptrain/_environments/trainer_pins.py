"""A trainer package's exact pins (`name==version` in its `install_requires`), and the day they date
a job to.

The service pip-installed a trainer's requirements on the day the job was submitted, and runtimes
took jobs long after their first year: a trainer that pins a release newer than its runtime's day
ran after that release. So the job's day moves forward to the newest pin's (never past the day the
service stopped, `era.SERVICE_END`), and its open requirements resolve as of that day; a label or
setting that names the day wins (`era.ResolveDay.pins_may_move`).

The pins are read as the install reads the package: a wheel's `METADATA`; an sdist's
`*.egg-info/requires.txt` (what setuptools wrote from setup.py, including a `requirements.txt` it
read), else its `PKG-INFO`, `pyproject.toml`, `setup.cfg`, or the literal `install_requires` of its
`setup.py` (with the `requirements.txt` it reads). A pin under a marker counts when the marker is a
`python_version` comparison the job's Python meets; extras and other markers never move the day.
"""

from __future__ import annotations

import ast
import configparser
import datetime
import re
import tarfile
import tomllib
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from aiptrain._environments.release_dates import ReleaseDates
from aiptrain._job.era import ResolveDay, moved_by_pin

# `name[extras] == version ; marker` and PKG-INFO's older `name (==version)`.
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._\-]*)\s*(?:\[[^\]]*\])?\s*\(?\s*===?\s*"
                  r"([A-Za-z0-9][^\s,;()*]*)\s*\)?\s*$")
_PYTHON_MARKER = re.compile(r"""^\s*python_version\s*(==|!=|<=|>=|<|>)\s*["'](\d+(?:\.\d+)*)["']\s*$""")
_COMPARE: dict[str, Callable[[tuple[int, ...], tuple[int, ...]], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


@dataclass(frozen=True)
class Pin:
    """`name==version` as the trainer wrote it."""

    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


def day_with_pins(day: ResolveDay, packages: list[Path], python_version: str, dates: ReleaseDates) -> ResolveDay:
    """`day`, moved forward to the newest release the packages pin when it came later (and the day
    may move). Raises release_dates.DatesUnavailable when a pin's day cannot be learnt."""
    if not day.pins_may_move or day.day is None:
        return day
    newest: tuple[Pin, datetime.date] | None = None
    for pin in (pin for package in packages for pin in exact_pins(package, python_version)):
        published = dates.published(pin.name, pin.version)
        if published is not None and published > day.day and (newest is None or published > newest[1]):
            newest = (pin, published)
    if newest is None:
        return day
    return moved_by_pin(day, str(newest[0]), newest[1])


def exact_pins(package: Path, python_version: str) -> list[Pin]:
    """The `==` pins among `package`'s requirements that apply on `python_version`, in order."""
    python = tuple(int(part) for part in python_version.split(".")[:2] if part.isdigit()) or (3,)
    pins = []
    for line in requirements_of(package):
        requirement, _, marker = line.partition(";")
        if marker.strip() and not _python_marker_holds(marker, python):
            continue
        found = _PIN.match(requirement)
        if found is not None:
            pins.append(Pin(found.group(1), found.group(2)))
    return pins


def requirements_of(package: Path) -> list[str]:
    """The package's `install_requires` as requirement lines (a marker after `;`); [] when none
    can be read (the install then says what is wrong with the package)."""
    try:
        files = _Archive(package)
    except (OSError, tarfile.TarError, zipfile.BadZipFile):
        return []
    with files:
        if package.name.endswith(".whl"):
            return _requires_dist(files.read_first("*.dist-info/METADATA"))
        requires = files.read_first("*.egg-info/requires.txt")
        if requires is not None:
            return _egg_info_requires(requires)
        for reader in (_pkg_info, _pyproject, _setup_cfg, _setup_py):
            found = reader(files)
            if found is not None:
                return found
    return []


class _Archive:
    """An sdist (tar or zip) or wheel, its members named from the project's root."""

    def __init__(self, path: Path) -> None:
        self._tar: tarfile.TarFile | None = None
        self._zip: zipfile.ZipFile | None = None
        if zipfile.is_zipfile(path):
            self._zip = zipfile.ZipFile(path)
            names = self._zip.namelist()
        else:
            self._tar = tarfile.open(path)  # noqa: SIM115 (closed by __exit__)
            names = [member.name for member in self._tar.getmembers() if member.isfile()]
        # An sdist's files sit under `name-version/`; a wheel's at its root.
        top = {name.split("/", 1)[0] for name in names}
        self._prefix = f"{top.pop()}/" if len(top) == 1 and not path.name.endswith(".whl") else ""
        self.names = {name.removeprefix(self._prefix): name for name in names}

    def read_first(self, pattern: str) -> str | None:
        """The text of the shallowest member matching `pattern` (fnmatch-like, from the root)."""
        import fnmatch

        matches = sorted((n for n in self.names if fnmatch.fnmatch(n, pattern)), key=lambda n: (n.count("/"), n))
        return self.read(matches[0]) if matches else None

    def read(self, name: str) -> str | None:
        member = self.names.get(name)
        if member is None:
            return None
        if self._zip is not None:
            data = self._zip.read(member)
        else:
            assert self._tar is not None
            handle = self._tar.extractfile(member)
            if handle is None:
                return None
            data = handle.read()
        return data.decode("utf-8", errors="replace")

    def __enter__(self) -> _Archive:
        return self

    def __exit__(self, *_exc: object) -> None:
        (self._zip or self._tar).close()  # type: ignore[union-attr]


def _requires_dist(metadata: str | None) -> list[str]:
    if metadata is None:
        return []
    return list(HeaderParser().parsestr(metadata).get_all("Requires-Dist") or [])


def _egg_info_requires(text: str) -> list[str]:
    """requires.txt: plain lines, then `[extra]` and `[extra:marker]` / `[:marker]` sections; only
    the marker-only sections are install_requires (under their marker)."""
    lines, marker, wanted = [], "", True
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            extra, _, marker = line[1:-1].partition(":")
            wanted = not extra
            continue
        if wanted:
            lines.append(f"{line} ; {marker}" if marker else line)
    return lines


def _pkg_info(files: _Archive) -> list[str] | None:
    found = _requires_dist(files.read("PKG-INFO"))
    return found or None


def _pyproject(files: _Archive) -> list[str] | None:
    text = files.read("pyproject.toml")
    if text is None:
        return None
    try:
        project = tomllib.loads(text).get("project", {})
    except tomllib.TOMLDecodeError:
        return None
    dependencies = project.get("dependencies")
    return [str(item) for item in dependencies] if isinstance(dependencies, list) else None


def _setup_cfg(files: _Archive) -> list[str] | None:
    text = files.read("setup.cfg")
    if text is None:
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    value = parser.get("options", "install_requires", fallback=None)
    return _lines(value.splitlines()) if value is not None else None


def _setup_py(files: _Archive) -> list[str] | None:
    """setup.py's `install_requires=[...]` when it is a literal (or a name bound to one), else the
    `requirements.txt` it reads."""
    text = files.read("setup.py")
    if text is None:
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    bound = {target.id: node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
             for target in node.targets if isinstance(target, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "install_requires":
                    value = bound.get(keyword.value.id, keyword.value) if isinstance(keyword.value, ast.Name) \
                        else keyword.value
                    with_literal = _literal_strings(value)
                    if with_literal is not None:
                        return with_literal
    if "requirements.txt" in text:
        listed = files.read("requirements.txt")
        if listed is not None:
            return _lines(line for line in listed.splitlines() if not line.strip().startswith("-"))
    return None


def _literal_strings(node: ast.expr) -> list[str] | None:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, str):
        return _lines(value.splitlines())
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return list(value)
    return None


def _lines(lines: Iterable[str]) -> list[str]:
    return [line.split(" #", 1)[0].strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def _python_marker_holds(marker: str, python: tuple[int, ...]) -> bool:
    found = _PYTHON_MARKER.match(marker)
    if found is None:
        return False
    wanted = tuple(int(part) for part in found.group(2).split("."))
    return _COMPARE[found.group(1)](python[: len(wanted)], wanted)
