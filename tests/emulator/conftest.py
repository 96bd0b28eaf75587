"""Fixtures of the emulator's tests: one trainer sdist per session, a real emulator per module,
fake-gcs-server for jobs whose packages a client staged there."""

from tests.fixtures.emulator import emulator, trainer_sdist
from tests.fixtures.gcs import fake_gcs, fake_gcs_server

__all__ = ["emulator", "fake_gcs", "fake_gcs_server", "trainer_sdist"]
