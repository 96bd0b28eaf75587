"""Installing a trainer package as the service did: with its `install_requires`, on top of the
runtime (the service pip-installed the package into the runtime image).

One package goes into one directory (`--target`) with uv, resolved against the runtime
environment:

- the environment's exact versions are constraints, so a trainer that asks for `pandas` or
  `scikit-learn>=1.0` gets the runtime's copy; a trainer whose pins conflict with them is
  resolved again without them and gets its own versions, which shadow the runtime's;
- TensorFlow requirements are dropped (an override that never applies): the runtime provides
  TensorFlow, as the image did, and `tensorflow==1.15` in an old setup.py must not pull a second
  TensorFlow (or fail) on a runtime that substitutes 2.15;
- whatever uv put in the directory that the environment already has at the same version is
  removed again, so a job's site holds only what the trainer adds;
- where uv refuses what the era's pip accepted (the legacy metadata of pandas 0.24, an old sdist
  uv cannot build), the environment's own pip installs the package instead, as the service's did;
- a requirement that cannot install on the runtime's Python fails with one line naming the
  package, the Python it needs and the one the runtime runs (`python_mismatch`).
"""

from __future__ import annotations

import os
import re
import shutil
from email.parser import HeaderParser
from pathlib import Path

from aiptrain.environments.store import Environment, normalise_name
from aiptrain.environments.uv import failure_reason, uv_binary

# Provided by the runtime whatever the trainer asks: TensorFlow in its packagings.
RUNTIME_PROVIDED = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tensorflow-intel")
_NEVER = 'sys_platform == "aiptrain-runtime-provides-it"'


def overrides_file(directory: Path) -> Path:
    path = directory / "runtime-overrides.txt"
    path.write_text("".join(f"{name} ; {_NEVER}\n" for name in RUNTIME_PROVIDED))
    return path


def install_argv(
    package: Path, environment: Environment, site: Path, overrides: Path, *, constrained: bool
) -> list[str]:
    argv = [
        uv_binary(), "pip", "install", "--quiet", "--python", environment.python, "--target", str(site),
        "--no-build-isolation", "--override", str(overrides),
    ]
    if constrained:
        argv += ["--constraint", str(environment.constraints)]
    return [*argv, str(package)]


# uv: "... and pandas==1.4.1 depends on Python>=3.8, we can conclude ..."
_UV_NEEDS_PYTHON = re.compile(r"(?:and |, )([A-Za-z0-9_.\-\[\]]+(?:==[^\s,]+)?) depends on Python([<>=!~][^\s,]*)")
# pip: "ERROR: Package 'pandas' requires a different Python: 3.7.16 not in '>=3.8'", or
# "Ignored the following versions that require a different python version: 1.4.1 Requires-Python >=3.8"
_PIP_NEEDS_PYTHON = re.compile(r"Package '([^']+)' requires a different Python: \S+ not in '([^']+)'")
_PIP_IGNORED = re.compile(r"require a different python version: (\S+) Requires-Python ([^;\s]+)")
# uv's answers where the era's pip would have gone on: metadata it will not parse, builds it cannot do.
_PIP_NO_VERSION = re.compile(r"satisfies the requirement (\S+)")
_UV_REFUSALS = ("could not be parsed", "Failed to parse", "Failed to build", "Failed to download and build",
                "Failed to prepare distributions", "invalid metadata")


def is_resolution_conflict(lines: list[str]) -> bool:
    return any("No solution found" in line for line in lines)


def failure_reason_line(lines: list[str]) -> str:
    """uv's reason, short enough for one log line."""
    reason = failure_reason(lines)
    return reason if len(reason) <= 200 else reason[:197] + "..."


def uv_refused(lines: list[str]) -> bool:
    """Whether uv stopped at something pip would have installed (the fallback applies)."""
    return any(marker in line for line in lines for marker in _UV_REFUSALS)


def pip_argv(package: Path, environment: Environment, site: Path, *, constrained: bool) -> list[str]:
    """The environment's own pip, as the service installed trainer packages."""
    argv = [environment.python, "-m", "pip", "install", "--no-input", "--quiet", "--disable-pip-version-check",
            "--target", str(site)]
    if constrained:
        argv += ["--constraint", str(environment.constraints)]
    return [*argv, str(package)]


def python_mismatch(lines: list[str], environment: Environment) -> str | None:
    """One line for a requirement that needs another Python than the runtime's, else None:
    `pandas==1.4.1 needs Python >= 3.8; runtime 1.15 runs Python 3.7`."""
    text = " ".join(line.strip() for line in lines)
    found = _UV_NEEDS_PYTHON.search(text) or _PIP_NEEDS_PYTHON.search(text)
    if found is not None:
        requirement, spec = found.group(1), found.group(2)
    else:
        ignored = _PIP_IGNORED.search(text)
        wanted = _PIP_NO_VERSION.search(text)
        if ignored is None or wanted is None:
            return None
        requirement, spec = wanted.group(1), ignored.group(2)
    spec = re.sub(r"([<>=!~]+)", r"\1 ", spec.strip("'")).replace(",", ", ")
    manifest = environment.manifest()
    return (f"{requirement} needs Python {spec}; runtime {manifest.get('runtime', '?')} runs Python "
            f"{manifest.get('python_version', '?')}")


def failure_message(package: Path, environment: Environment, lines: list[str]) -> str:
    manifest = environment.manifest()
    return (
        f"Installing the trainer package {package.name} with its dependencies failed: {failure_reason(lines)} "
        f"Hint: the job runs on Python {manifest.get('python_version', '?')} with TensorFlow "
        f"{manifest.get('tensorflow', '?')}; relax that pin in the package's install_requires (setup.py), "
        "or run with AIPTRAIN_LOCAL_PYTHON set to an interpreter that already has what the trainer needs."
    )


def prune_provided(site: Path, environment: Environment) -> list[str]:
    """Remove from `site` every distribution the environment has at the same version; their names."""
    installed = environment.installed()
    removed = []
    for info in sorted(site.glob("*.dist-info")):
        name, version = _name_and_version(info)
        if not name or installed.get(normalise_name(name)) != version:
            continue
        _remove_distribution(site, info)
        removed.append(name)
    _remove_empty_directories(site)
    try:
        (site / ".lock").unlink()  # uv's lock of the target directory
    except OSError:
        pass
    return removed


def _remove_empty_directories(site: Path) -> None:
    for directory, _dirs, _files in sorted(os.walk(site), key=lambda item: len(item[0]), reverse=True):
        if directory != str(site):
            try:
                os.rmdir(directory)  # only when empty
            except OSError:
                pass


def _name_and_version(info: Path) -> tuple[str, str]:
    """`Name` and `Version` of a dist-info's METADATA (its headers only)."""
    try:
        with (info / "METADATA").open(encoding="utf-8", errors="replace") as metadata:
            headers = HeaderParser().parse(metadata, headersonly=True)
    except OSError:
        return "", ""
    return str(headers.get("Name", "")).strip(), str(headers.get("Version", "")).strip()


def _remove_distribution(site: Path, info: Path) -> None:
    """Delete the files a distribution's RECORD lists (inside `site` only), then its metadata."""
    try:
        record = (info / "RECORD").read_text(encoding="utf-8", errors="replace")
    except OSError:
        record = ""
    site_root = os.path.realpath(site)
    for line in record.splitlines():
        relative = line.split(",", 1)[0]
        if not relative:
            continue
        path = os.path.realpath(os.path.join(site, relative))
        if not path.startswith(site_root + os.sep):
            continue
        try:
            os.unlink(path)
        except OSError:
            pass
    shutil.rmtree(info, ignore_errors=True)
