"""Fixtures of the vertex backend's tests: one trainer sdist per session, fake-gcs-server for
packages staged in Cloud Storage."""

from tests.fixtures.emulator import trainer_sdist
from tests.fixtures.gcs import fake_gcs_server

__all__ = ["fake_gcs_server", "trainer_sdist"]
