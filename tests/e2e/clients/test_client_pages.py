"""The client pages name the releases the suite runs them with, and tensorflow-cloud's page installs
what its venv installs (cheap: no client runs here)."""

from __future__ import annotations

import shlex

import pytest

from tests.e2e.clients.conftest import CLIENT_PAGES, page_code
from tests.fixtures.client_venvs import AIRFLOW, PIPELINE_COMPONENTS, TENSORFLOW_CLOUD, ClientVenv


@pytest.mark.parametrize(("page", "client"), [("airflow.md", AIRFLOW),
                                              ("vertex-pipelines.md", PIPELINE_COMPONENTS),
                                              ("tensorflow-cloud.md", TENSORFLOW_CLOUD)])
def test_each_page_names_the_release_and_python_the_suite_runs(page: str, client: ClientVenv) -> None:
    text = " ".join((CLIENT_PAGES / page).read_text().split())
    for pinned in (*client.requirements, *client.without_dependencies):
        if "==" in pinned:
            assert f" {pinned.split('==')[1]} " in text, f"{page} does not name the release of {pinned}"
    assert f"Python {client.python}" in text


def test_the_tensorflow_cloud_page_installs_what_its_venv_installs() -> None:
    block = page_code("tensorflow-cloud.md", "install the\npackage without them", "bash")
    commands = [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    with_dependencies, without = commands
    assert with_dependencies[:2] == ["pip", "install"] and tuple(with_dependencies[2:]) == TENSORFLOW_CLOUD.requirements
    assert without[:3] == ["pip", "install", "--no-deps"]
    assert tuple(without[3:]) == TENSORFLOW_CLOUD.without_dependencies
