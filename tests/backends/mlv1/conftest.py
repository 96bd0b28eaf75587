"""Fixtures of the mlv1 backend's tests: one trainer sdist per session, a real emulator per module,
fake-gcs-server for packages staged in Cloud Storage."""

from tests.fixtures.emulator import emulator, trainer_sdist
from tests.fixtures.gcs import fake_gcs_server

__all__ = ["emulator", "fake_gcs_server", "trainer_sdist"]
