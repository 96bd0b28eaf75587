"""`local train`: the foreground runner, its TF_CONFIG, its prefixed output and its exit code."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import aiptrain
from aiptrain._backends.local.local_train import local_train_groups, run_local_training
from aiptrain._replicas.ports import free_ports
from tests.fixtures.local_jobs import TRAINERS, processes_gone, read_pid, wait_until

PACKAGE = TRAINERS / "tfcfg"


def _lines_by_task(output: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in output.splitlines():
        match = re.match(r"^\[([\w-]+)\] (.*)$", line)
        assert match, f"unprefixed line: {line!r}"
        found.setdefault(match.group(1), []).append(match.group(2))
    return found


def _reported(lines: list[str], key: str) -> object:
    return json.loads(next(line for line in lines if line.startswith(key + " ")).split(" ", 1)[1])


def test_distributed_run_prefixes_lines_and_returns_the_primary_exit_code(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    job_dir = tmp_path / "job"
    code = run_local_training(
        PACKAGE, "tfcfg.announce", job_dir=str(job_dir), user_args=["--expect", "5", "--exit-code", "3"],
        distributed=True, worker_count=None, parameter_server_count=1, evaluator_count=1, start_port=None,
        out=out, err=err,
    )
    assert code == 3
    tasks, errors = _lines_by_task(out.getvalue()), _lines_by_task(err.getvalue())
    replicas = {"master-replica-0", "worker-replica-0", "worker-replica-1", "ps-replica-0", "evaluator-replica-0"}
    assert replicas <= set(tasks)
    for name in replicas:
        # Each line stays on the stream its replica wrote it to.
        assert f"hello from {name}" in tasks[name] and f"hello from {name}" not in errors.get(name, [])
        assert f"a warning from {name}" in errors[name] and f"a warning from {name}" not in tasks[name]
        assert _reported(tasks[name], "args") == ["--expect", "5", "--exit-code", "3", "--job-dir", str(job_dir)]
        assert _reported(tasks[name], "cwd") == str(TRAINERS)  # the package's parent, like gcloud
    chief = _reported(tasks["master-replica-0"], "TF_CONFIG")
    assert isinstance(chief, dict)
    assert list(chief) == ["job", "task", "cluster", "environment"]
    assert chief["job"] == {"job_name": "tfcfg.announce",
                            "args": ["--expect", "5", "--exit-code", "3", "--job-dir", str(job_dir)]}
    assert chief["task"] == {"type": "chief", "index": 0}
    assert list(chief["cluster"]) == ["chief", "ps", "worker"]
    assert [len(chief["cluster"][k]) for k in ("chief", "ps", "worker")] == [1, 1, 2]
    addresses = [a for group in chief["cluster"].values() for a in group]
    assert len(set(addresses)) == 4
    evaluator = _reported(tasks["evaluator-replica-0"], "TF_CONFIG")
    assert isinstance(evaluator, dict)
    assert evaluator["task"] == {"type": "evaluator", "index": 0}
    assert evaluator["cluster"] == chief["cluster"]
    # When the primary ended, the others were stopped.
    others = [int((job_dir / "ready" / name).read_text()) for name in replicas - {"master-replica-0"}]
    assert processes_gone(others, timeout=5)


def test_single_process_run_gets_an_empty_cluster(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run_local_training(
        PACKAGE, "tfcfg.announce", job_dir=str(tmp_path), user_args=[], distributed=False,
        worker_count=None, parameter_server_count=None, evaluator_count=2, start_port=None, out=out, err=err,
    )
    assert code == 0
    tasks = _lines_by_task(out.getvalue())
    assert set(tasks) - {"aiptrain"} == {"master-replica-0"}
    config = _reported(tasks["master-replica-0"], "TF_CONFIG")
    assert config == {"job": {"job_name": "tfcfg.announce", "args": ["--job-dir", str(tmp_path)]},
                      "task": {}, "cluster": {}, "environment": "cloud"}


def test_start_port_gives_consecutive_ports_in_gcloud_order(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    start = free_ports(1)[0]
    code = run_local_training(
        PACKAGE, "tfcfg.announce", job_dir=str(tmp_path), user_args=["--expect", "3"], distributed=True,
        worker_count=1, parameter_server_count=1, evaluator_count=0, start_port=start, out=out, err=err,
    )
    assert code == 0
    config = _reported(_lines_by_task(out.getvalue())["master-replica-0"], "TF_CONFIG")
    assert isinstance(config, dict)
    assert config["cluster"] == {"chief": [f"localhost:{start}"], "ps": [f"localhost:{start + 1}"],
                                 "worker": [f"localhost:{start + 2}"]}


def test_gs_job_dir_is_passed_unchanged_and_served_from_the_local_store(home: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run_local_training(
        PACKAGE, "tfcfg.dump_env", job_dir="gs://bucket/run1", user_args=[], distributed=False,
        worker_count=None, parameter_server_count=None, evaluator_count=0, start_port=None, out=out, err=err,
    )
    assert code == 0, err.getvalue()
    local = home / "storage" / "bucket" / "run1"
    report = json.loads((local / "env" / "master-replica-0.json").read_text())
    assert report["argv"][-2:] == ["--job-dir", "gs://bucket/run1"]
    assert f"[aiptrain] gs:// is served to the replicas from the local store {home / 'storage'}" in err.getvalue()
    assert "[aiptrain]" not in out.getvalue()  # aiptrain's notes are progress, on stderr


def test_defaults_follow_gcloud() -> None:
    groups = local_train_groups(True, None, None, 0)
    assert [(g.task_type, g.count) for g in groups] == [("chief", 1), ("worker", 2), ("ps", 2)]
    assert [(g.task_type, g.count) for g in local_train_groups(False, 3, 3, 1)] == [("chief", 1)]


def test_primary_killed_by_a_signal_gives_the_shell_code(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run_local_training(
        PACKAGE, "tfcfg.announce", job_dir=str(tmp_path), user_args=["--signal", "9"], distributed=False,
        worker_count=None, parameter_server_count=None, evaluator_count=0, start_port=None, out=out, err=err,
    )
    assert code == 128 + 9


@pytest.mark.parametrize("module", ["tfcfg.no_such_module"])
def test_missing_module_returns_python_s_status(tmp_path: Path, module: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run_local_training(
        PACKAGE, module, job_dir=None, user_args=[], distributed=False, worker_count=None,
        parameter_server_count=None, evaluator_count=0, start_port=None, out=out, err=err,
    )
    assert code == 1
    assert "No module named tfcfg.no_such_module" in err.getvalue()


def test_ctrl_c_stops_every_replica(tmp_path: Path) -> None:
    script = (
        "import sys; from pathlib import Path\n"
        "from aiptrain._backends.local.local_train import run_local_training\n"
        f"run_local_training(Path({str(PACKAGE)!r}), 'tfcfg.announce', job_dir={str(tmp_path)!r},\n"
        "    user_args=['--expect', '99'], distributed=True, worker_count=1, parameter_server_count=1,\n"
        "    evaluator_count=0, start_port=None, out=sys.stdout, err=sys.stderr)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(aiptrain.__file__).parent.parent))
    runner = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    try:
        ready = tmp_path / "ready"
        wait_until(lambda: ready.is_dir() and len(list(ready.glob("*-replica-0"))) == 3, 60, "three replicas")
        pids = [read_pid(path) for path in ready.glob("*-replica-0")]
        runner.send_signal(signal.SIGINT)
        runner.wait(30)
    finally:
        runner.kill()
    assert runner.returncode == -signal.SIGINT  # KeyboardInterrupt reached the top, as the CLI expects
    assert processes_gone(pids, timeout=5)
