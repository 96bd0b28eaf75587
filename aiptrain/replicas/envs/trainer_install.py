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
  removed again, so a job's site holds only what the trainer adds.
"""

from __future__ import annotations

import os
import shutil
from email.parser import HeaderParser
from pathlib import Path

from aiptrain.replicas.envs.store import Environment, normalise_name
from aiptrain.replicas.envs.uv import failure_reason, uv_binary

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


def is_resolution_conflict(lines: list[str]) -> bool:
    return any("No solution found" in line for line in lines)


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
