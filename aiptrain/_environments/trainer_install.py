"""Installing a trainer package as the service did: with its `install_requires`, pip-installed into the
runtime's image while the runtime was current.

Each package goes into the job's site directory (`--target`) with uv, in the order the job lists
them, each seeing the ones before:

- the runtime's packages are shown to uv as installed (`overlay`): a requirement they meet is kept
  ("already satisfied"), one they do not is replaced by the trainer's own version, which shadows the
  runtime's (TensorFlow too: `tensorflow==1.15.2` on runtime 1.15 runs 1.15.2, as pip installed it);
- nothing uploaded after the job's day is installed (`--exclude-newer`, `job.era`), so an open
  requirement gets what pip got then;
- the runtime's reading of package metadata uv cannot parse (its own pandas) comes from the
  environment's uv configuration (`store`);
- where uv refuses what the era's pip accepted (legacy metadata, an unparseable Requires-Python, an
  old sdist it cannot build) the runtime's own pip installs the package instead (`pip_fallback`);
- a requirement that cannot install on the runtime's Python fails with one line naming it, the
  Python it needs and the one the runtime runs (`python_mismatch`); a pin published after a day the
  job named (a runtime's day moves to the pin's instead: `trainer_pins`) fails naming the day and how
  to move it (`published_after_the_day`).

The fallback environment (TensorFlow 2.15 standing in for a runtime) keeps TensorFlow out of the
resolution instead: a trainer's `tensorflow==1.15` must not pull a second TensorFlow onto it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from aiptrain._environments.store import Environment
from aiptrain._environments.uv import failure_reason, uv_binary
from aiptrain._job.era import LABEL, SETTING, ResolveDay

# TensorFlow in its packagings: requirements on them vanish on an environment that stands in.
RUNTIME_PROVIDED = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tensorflow-intel")
_NEVER = 'sys_platform == "aiptrain-runtime-provides-it"'


def overrides_file(directory: Path) -> Path:
    """An override that removes every TensorFlow requirement (its marker is never true)."""
    path = directory / "runtime-overrides.txt"
    path.write_text("".join(f"{name} ; {_NEVER}\n" for name in RUNTIME_PROVIDED))
    return path


def install_argv(package: Path, environment: Environment, site: Path, day: ResolveDay, *,
                 overrides: Path | None = None) -> list[str]:
    argv = [uv_binary(), "pip", "install", "--python", environment.python, "--target", str(site),
            "--no-build-isolation"]
    if environment.uv_config.is_file():
        argv += ["--config-file", str(environment.uv_config)]
    if day.exclude_newer is not None:
        argv += ["--exclude-newer", day.exclude_newer]
    if overrides is not None:
        argv += ["--override", str(overrides)]
    return [*argv, str(package)]


# uv: "... and pandas==1.4.1 depends on Python>=3.8, we can conclude ..."
_UV_NEEDS_PYTHON = re.compile(r"(?:and |, )([A-Za-z0-9_.\-\[\]]+(?:==[^\s,]+)?) depends on Python([<>=!~][^\s,]*)")
# pip: "ERROR: Package 'pandas' requires a different Python: 3.7.16 not in '>=3.8'", or
# "Ignored the following versions that require a different python version: 1.4.1 Requires-Python >=3.8"
_PIP_NEEDS_PYTHON = re.compile(r"Package '([^']+)' requires a different Python: \S+ not in '([^']+)'")
_PIP_IGNORED = re.compile(r"require a different python version: (\S+) Requires-Python ([^;\s]+)")
_PIP_NO_VERSION = re.compile(r"satisfies the requirement (\S+)")
# uv's answers where the era's pip would have gone on: metadata it will not parse, builds it cannot do.
_UV_REFUSALS = ("could not be parsed", "Failed to parse", "Failed to read metadata", "Failed to build",
                "Failed to download and build", "Failed to prepare distributions", "invalid metadata")
# "there is no version of python-networkdays==1.0.2": no such file, or (silently) one whose
# Requires-Python uv cannot parse, or one published after the day (then a hint says when).
_NO_VERSION = re.compile(r"there is no version of ([A-Za-z0-9_.\-]+)==([^\s,]+)")
_PUBLISHED = re.compile(r"`([^`]+)` was filtered by `exclude-newer`.*?requested version, v(\S+), was published at "
                        r"(\d{4}-\d\d-\d\d)")


@dataclass(frozen=True)
class MissingPin:
    """A pinned requirement uv found no file of: `name==version`."""

    name: str
    version: str


def failure_reason_line(lines: list[str]) -> str:
    """uv's reason, short enough for one log line."""
    reason = failure_reason(lines)
    return reason if len(reason) <= 200 else reason[:197] + "..."


def uv_refused(lines: list[str]) -> bool:
    """Whether uv stopped at something pip would have installed (the fallback applies)."""
    return any(marker in line for line in lines for marker in _UV_REFUSALS)


def missing_pin(lines: list[str]) -> MissingPin | None:
    """The pin uv found no version of (whatever the reason), else None."""
    found = _NO_VERSION.search(" ".join(line.strip() for line in lines))
    return MissingPin(found.group(1), found.group(2)) if found else None


def published_after_the_day(package: Path, lines: list[str], day: ResolveDay) -> str | None:
    """The job's error message for a pin uv left out because it came after the day, else None."""
    text = " ".join(line.strip() for line in lines)
    found = _PUBLISHED.search(text)
    if found is None or day.day is None:
        return None
    name, version, published = found.groups()
    return (f"Installing the trainer package {package.name} failed: its requirement {name}=={version} was published "
            f"on {published}, after {day.day.isoformat()}, the day the job's packages resolve as of ({day.origin}). "
            f"Hint: run the job as of a later day (--labels {LABEL}={published}, or {SETTING}={published}), or "
            "relax the pin in the package's install_requires (setup.py).")


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
