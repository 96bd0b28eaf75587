"""Fixtures of the submit tests: the emulator's test trainer, built once per session."""

from tests.fixtures.emulator import trainer_sdist

__all__ = ["trainer_sdist"]
