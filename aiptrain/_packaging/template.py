"""The trainer template that `aiptrain init` copies into a new project.

The template lives in the source tree as `trainer_template/`; wheels carry it as package data
under `aiptrain/data/template` (a symlink to that directory in a checkout). Only the files a
new project needs are copied: the `trainer` package, its setup.py, the README, sample job
configurations and a small sample of the data (`sample_data/`, so that a first job needs no
extra package to make its data); never caches, build output or generated data.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from aiptrain.errors import InternalError, UsageError

# What a new project gets, relative to the template root.
TEMPLATE_ENTRIES = ("trainer", "setup.py", "README.md", "config.yaml", "hptuning_config.yaml", "sample_data")

_NEVER_COPIED = shutil.ignore_patterns(
    "__pycache__", "*.pyc", "*.pyo", "*.egg-info", ".pytest_cache", ".mypy_cache", ".ruff_cache", "build", "dist"
)

# The aiptrain package directory (this module sits in aiptrain/_packaging/).
_PACKAGE_DIR = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class InitResult:
    """A freshly created project: where it is, what was written, and what to run next."""

    directory: Path
    files: list[Path]
    next_steps: list[str]


def template_root() -> Path:
    """The template directory, from the installed package data or from a source checkout."""
    candidates = (_PACKAGE_DIR / "data" / "template", _PACKAGE_DIR.parent / "trainer_template")
    for candidate in candidates:
        if (candidate / "trainer" / "task.py").is_file():
            return candidate
    raise InternalError(
        "the trainer template is missing from this aiptrain installation",
        hint="reinstall aiptrain; the wheel ships the template under aiptrain/data/template",
    )


def _check_destination(directory: Path) -> None:
    if not directory.exists():
        return
    if not directory.is_dir():
        raise UsageError(
            f"{directory} exists and is not a directory",
            hint="choose a new directory name for the project",
        )
    if any(directory.iterdir()):
        raise UsageError(
            f"{directory} is not empty; aiptrain init never overwrites files",
            hint=f"choose a new directory, or empty {directory} first",
        )


def next_steps(directory: Path) -> list[str]:
    """Commands that take the new project from nothing to a running job."""
    data = "$PWD/sample_data"
    # Double quotes: the shell expands $PWD, the trainer expands the glob.
    trainer_args = f'--train-files "{data}/train-*.csv" --eval-files "{data}/eval-*.csv"'
    # The sample needs nothing installed; `make_data` writes all 1797 images but needs scikit-learn,
    # which the runtime environments have (`aiptrain local envs build 2.11` prints where).
    return [
        f"cd {directory}",
        f"aiptrain local train --package-path trainer --module-name trainer.task -- {trainer_args} --train-steps 300",
        "aiptrain jobs submit training my_job_1 --package-path trainer/ --module-name trainer.task "
        "--region us-central1 --config config.yaml --job-dir gs://my-bucket/jobs/my_job_1 "
        f"--stream-logs -- {trainer_args}",
    ]


def init_project(directory: Path) -> InitResult:
    """Copy the template into `directory` (created if needed; it must be empty if it exists)."""
    _check_destination(directory)
    root = template_root()
    directory.mkdir(parents=True, exist_ok=True)
    for name in TEMPLATE_ENTRIES:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, directory / name, ignore=_NEVER_COPIED)
        else:
            shutil.copy2(source, directory / name)
    files = sorted(path.relative_to(directory) for path in directory.rglob("*") if path.is_file())
    return InitResult(directory=directory, files=files, next_steps=next_steps(directory))
