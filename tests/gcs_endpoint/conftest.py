"""Fixtures of the storage endpoint's tests: an engine per test for the jobs that run real trainers
against it, and quick stop settings (tests/fixtures/engine.py)."""

from tests.fixtures.engine import engine, home, quick_settings

__all__ = ["engine", "home", "quick_settings"]
