"""The console's fixtures: the session's Chromium, a page per test, and one real `local serve` per
module with the console trainer staged in its store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.browser import browser, console_page
from tests.fixtures.console_jobs import ConsoleServer, build_console_trainer, console_server

__all__ = ["browser", "console", "console_page", "console_trainer"]


@pytest.fixture(scope="session")
def console_trainer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_console_trainer(tmp_path_factory.mktemp("console-trainer"))


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory, console_trainer: Path) -> Iterator[ConsoleServer]:
    with console_server(tmp_path_factory.mktemp("console-home"), console_trainer) as server:
        yield server
