"""Airflow 2.10 with apache-airflow-providers-google 14.1.0, unchanged: a DAG of one
`MLEngineStartTrainingJobOperator` run by `dag.test()`, no hook subclass and no endpoint, with
`aiptrain local env`'s environment and Airflow's own settings (its home, the connection its hook
looks up, `google-cloud-platform://`: no key, so Google's default credentials)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.clients.conftest import PACKAGE_URI, PROJECT, ProxiedEmulator
from tests.fixtures.client_venvs import AIRFLOW, BuiltVenv, ensure_venv

pytestmark = pytest.mark.slow

PROGRAM = Path(__file__).with_name("programs") / "airflow_dag.py"


@pytest.fixture(scope="module")
def venv() -> BuiltVenv:
    return ensure_venv(AIRFLOW)


def airflow_settings(home: Path) -> dict[str, str]:
    return {"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT": "google-cloud-platform://"}


def test_the_operator_runs_a_job_to_success_in_dag_test(venv: BuiltVenv, proxied_emulator: ProxiedEmulator,
                                                        tmp_path: Path) -> None:
    env = {**proxied_emulator.env, **airflow_settings(tmp_path / "airflow")}
    migrated = venv.run(["-m", "airflow", "db", "migrate"], env, timeout=600, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr[-4000:]
    done = venv.run([str(PROGRAM), PROJECT, "airflow_job_1", PACKAGE_URI, "--lines", "2"], env, timeout=900,
                    cwd=tmp_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    assert "DAG RUN STATE: success" in done.stdout
    job = proxied_emulator.server.engine().get(PROJECT, "airflow_job_1")
    assert job.state == "SUCCEEDED"
    assert job.to_api()["trainingInput"]["packageUris"] == [PACKAGE_URI]
