"""Which Python a 1.x job runs on: 2.7 by default, on CPython 2.7 or not at all unless the setting
lets Python 3 stand in; Vertex's 1.15 images stay on their Python 3.7. Pure: the interpreters this
machine has are given (`find`), nothing is built."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from aiptrain._environments.interpreters import Interpreter
from aiptrain._environments.resolution import PYTHON2_MISSING_SETTING, Finder, resolve_runtime
from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import ReplicaConfig, TrainingInput
from aiptrain.errors import UsageError

CATALOG = load_catalog()


def machine_with(*versions: str) -> Finder:
    """A machine with these Pythons, as `interpreters.find` would report them."""
    def find(version: str, _env: Mapping[str, str] | None) -> Interpreter | None:
        found = version in versions
        return Interpreter(version, f"/opt/python{version}/bin/python{version}", "PATH") if found else None
    return find


def test_a_runtime_1_14_job_without_python_version_runs_on_python_2_7() -> None:
    resolution = resolve_runtime(TrainingInput(runtime_version="1.14"), CATALOG, find=machine_with("2.7", "3.6"),
                                 env={})
    assert (resolution.python, resolution.tensorflow, resolution.problem, resolution.why) == ("2.7", "1.14.0", None, "")
    assert resolution.interpreter is not None and resolution.interpreter.path == "/opt/python2.7/bin/python2.7"


def test_without_python_2_7_the_job_cannot_run_and_the_message_names_the_ways_out() -> None:
    resolution = resolve_runtime(TrainingInput(runtime_version="1.15", python_version="2.7"), CATALOG,
                                 find=machine_with("3.7"), env={}, downloads=True)
    assert resolution.problem is not None and not resolution.needs_download  # uv has no Python 2 to download
    assert resolution.problem.startswith("no Python 2.7 was found here (looked in ")
    assert "install CPython 2.7.18 (`pyenv install 2.7.18`" in resolution.problem
    assert resolution.problem.endswith(f"or set {PYTHON2_MISSING_SETTING}=python3 to run it on the runtime's "
                                       "nearest Python 3")


def test_the_setting_runs_a_python_2_7_job_on_the_nearest_python_3_and_says_so() -> None:
    resolution = resolve_runtime(TrainingInput(runtime_version="1.10"), CATALOG, find=machine_with("3.6"),
                                 env={PYTHON2_MISSING_SETTING: "python3"})
    assert (resolution.python, resolution.problem) == ("3.6", None)
    assert resolution.why.endswith(f"{PYTHON2_MISSING_SETTING}=python3 runs it on 3.6, the nearest Python 3 with a "
                                   "TensorFlow 1.10 build")
    with pytest.raises(UsageError, match="neither `fail` nor `python3`"):
        resolve_runtime(TrainingInput(runtime_version="1.10"), CATALOG, find=machine_with("3.6"),
                        env={PYTHON2_MISSING_SETTING: "yes"})


def test_vertex_s_runtime_1_15_image_runs_its_own_python_3_7_not_the_runtime_s_default_2_7() -> None:
    image = TrainingInput(python_module="trainer.task", master_config=ReplicaConfig(
        image_uri="us-docker.pkg.dev/vertex-ai/training/tf-cpu.1-15:latest"))
    resolution = resolve_runtime(image, CATALOG, find=machine_with("2.7", "3.7"), env={})
    assert (resolution.version, resolution.python, resolution.tensorflow) == ("1.15", "3.7", "1.15.0")
