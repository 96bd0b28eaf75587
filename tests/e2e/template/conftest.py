"""Fixtures for the trainer template tests: digits shards, an installed copy, replica launchers."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from tests.fixtures.template import TEMPLATE_DIR, Launcher, trainer_environment


@dataclass(frozen=True)
class DigitsData:
    directory: Path
    train_pattern: str
    eval_pattern: str

    @property
    def train_files(self) -> list[Path]:
        return sorted(self.directory.glob("train-*.csv"))

    @property
    def eval_files(self) -> list[Path]:
        return sorted(self.directory.glob("eval-*.csv"))

    def trainer_args(self) -> list[str]:
        return ["--train-files", self.train_pattern, "--eval-files", self.eval_pattern]


@pytest.fixture(scope="session")
def digits(tmp_path_factory: pytest.TempPathFactory) -> DigitsData:
    """The 8x8 digits as 4 training and 2 eval CSV shards, written once by the template's own script."""
    directory = tmp_path_factory.mktemp("digits")
    subprocess.run(
        [sys.executable, "-m", "trainer.make_data", "--output-dir", str(directory), "--shards", "4"],
        cwd=TEMPLATE_DIR,
        env=trainer_environment(),
        check=True,
        capture_output=True,
        timeout=120,
    )
    return DigitsData(directory, str(directory / "train-*.csv"), str(directory / "eval-*.csv"))


@pytest.fixture(scope="session")
def installed_trainer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The template packaged the way `jobs submit training` packages it, installed with pip --target."""
    from aiptrain._packaging import build_package

    root = tmp_path_factory.mktemp("trainer-package")
    env = trainer_environment()
    sdist = build_package(TEMPLATE_DIR / "trainer", cache_dir=root / "cache").path
    target = root / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(sdist)],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert (target / "trainer" / "task.py").exists()
    return target


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    log_dir = tmp_path / "replica-logs"
    log_dir.mkdir()
    launched = Launcher(log_dir)
    try:
        yield launched
    finally:
        launched.kill_all()


@pytest.fixture
def template_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Imports ``trainer.<name>`` from the template checkout, then forgets it again.

    Other tests may run trainers of their own named ``trainer``; the template's modules are only
    visible inside the test that asked for them.
    """
    saved = {name: module for name, module in sys.modules.items() if name == "trainer" or name.startswith("trainer.")}
    for name in saved:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(TEMPLATE_DIR))

    def load(name: str) -> ModuleType:
        return importlib.import_module(f"trainer.{name}")

    try:
        yield load
    finally:
        for name in [name for name in sys.modules if name == "trainer" or name.startswith("trainer.")]:
            del sys.modules[name]
