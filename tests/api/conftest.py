"""Fixtures of the Python API's tests: the tiny trainer, and the emulator with its trainer sdist."""

from tests.fixtures.emulator import emulator, trainer_sdist
from tests.fixtures.tiny_trainer import trainer

__all__ = ["emulator", "trainer", "trainer_sdist"]
