"""--dry-run says what the runtime version becomes on the local backend (nothing is built)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import TRAINERS, aiptrain


@pytest.fixture
def no_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("AIPTRAIN_LOCAL_PYTHON", raising=False)
    envs = tmp_path / "envs"
    monkeypatch.setenv("AIPTRAIN_ENVS_DIR", str(envs))
    return envs


def _dry_run(version: str, *extra: str) -> tuple[int, str, str]:
    result = aiptrain("jobs", "submit", "training", "dry", "--package-path", str(TRAINERS / "compat_v1" / "trainer"),
                      "--module-name", "trainer.task", "--region", "us-central1", "--runtime-version", version,
                      "--dry-run", *extra)
    return result.returncode, result.stdout, result.stderr


def test_dry_run_states_the_substitution_and_builds_nothing(no_override: Path) -> None:
    code, out, err = _dry_run("2.1")
    assert code == 0, err
    # 2.x ran Python 3.7 only, and the service refused a 2.x job that named none: said, not refused.
    assert ("Runtime:\n  Runtime version 2.1 with Python 3.7 (the only one runtime 2.1 supports): TensorFlow "
            "2.1.0 on Python 3.7 (") in out
    assert "Runtime packages: tensorflow-cpu 2.1.0, numpy 1.18.0, scipy 1.4.1, pandas 0.25.3" in out
    assert ("warning: no --python-version given: runtime 2.1 runs Python 3.7, the only one it supports (AI Platform "
            "Training refused 2.x jobs without one); add --python-version 3.7") in out + err
    assert "retired" not in out
    assert not no_override.exists()


def test_dry_run_of_a_retired_runtime_warns_and_json_carries_the_notes(no_override: Path) -> None:
    code, out, err = _dry_run("1.10", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert "TensorFlow 1.10.1 on Python 2.7 (" in plan["localRuntime"][0]  # the service's default, found here
    assert plan["localRuntime"][1].startswith("Runtime packages: tensorflow 1.10.1, numpy 1.14.5")
    assert any(w.startswith("runtime version 1.10 was retired") for w in plan["warnings"])


def test_unknown_runtime_version_exits_2_with_the_list(no_override: Path) -> None:
    code, _out, err = _dry_run("2.9")
    assert code == 2
    assert "unknown runtime version '2.9'" in err and "1.0, 1.1, 1.2" in err and "2.8, 2.11" in err
    assert "did you mean 2.8 or 2.11?" in err


def test_runtime_1_3_is_unknown_and_its_neighbours_are_named(no_override: Path) -> None:
    # No source names a runtime 1.3; the nearest spelling (1.13) is not what was meant.
    code, _out, err = _dry_run("1.3")
    assert code == 2, err
    assert "unknown runtime version '1.3'" in err and "did you mean 1.2 or 1.4?" in err
