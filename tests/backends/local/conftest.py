"""Fixtures of the local backend's tests: an engine and a backend per test, the test trainer package
built once per session and staged into each test's store (tests/fixtures/local_jobs.py), and the tiny
trainer of the command-line tests. At teardown every process a test's jobs started is killed."""

from tests.fixtures.local_jobs import backend, engine, home, package_uri, quick_settings, trainer_sdist
from tests.fixtures.tiny_trainer import trainer

__all__ = ["backend", "engine", "home", "package_uri", "quick_settings", "trainer", "trainer_sdist"]
