"""Real jobs on the local backend, each replica reporting its share of the machine.

A fake `nvidia-smi` on PATH stands in for a machine with GPUs: it lists Tesla T4s the way the
real one does; the supervisor (which inherits this test's environment) finds them there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aiptrain._backends.local.backend import LocalBackend
from aiptrain._cli.main import root
from aiptrain._job.spec import JobState
from aiptrain._replicas.machine_share import cpu_counts, pinned_cores
from aiptrain._replicas.this_machine import usable_cores
from tests.fixtures.local_jobs import (
    TRAINERS,
    local_dir,
    make_job,
    training_input,
    wait_for_end,
    wait_for_state,
    wait_until,
)

T4 = {"type": "NVIDIA_TESLA_T4", "count": "1"}


@pytest.fixture
def two_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        "[ \"$1\" = -L ] || exit 3\n"
        "echo 'GPU 0: Tesla T4 (UUID: GPU-11111111-2222-3333-4444-555555555555)'\n"
        "echo 'GPU 1: Tesla T4 (UUID: GPU-66666666-7777-8888-9999-000000000000)'\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _shares(home: Path, job_dir: str) -> dict[str, dict[str, Any]]:
    return {path.stem: json.loads(path.read_text()) for path in (local_dir(home, job_dir) / "share").glob("*.json")}


def _service_lines(backend: LocalBackend, job_id: str) -> list[str]:
    return [entry.message for entry in backend.read_logs(job_id) if entry.task_name == "service"]


def test_replicas_get_disjoint_gpus_and_threads_sized_to_their_share(
    backend: LocalBackend, home: Path, package_uri: str, two_gpus: None, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MKL_NUM_THREADS", "3")  # the user's own: kept as set
    inputs = training_input(package_uri, "tfcfg.share", job_dir="gs://out/share", args=["--expect", "3"],
                            workers=1, parameter_servers=1, runtime=None,
                            masterConfig={"acceleratorConfig": T4}, workerConfig={"acceleratorConfig": T4})
    backend.create_job(make_job("share", inputs))
    done = wait_for_end(backend.engine, "share")
    assert done.state == JobState.SUCCEEDED, done.error_message

    got = _shares(home, "gs://out/share")
    assert set(got) == {"master-replica-0", "worker-replica-0", "ps-replica-0"}
    # Each replica that asked for a T4 sees one of its own; the parameter server sees none.
    gpus = {name: report["env"]["CUDA_VISIBLE_DEVICES"] for name, report in got.items()}
    assert sorted([gpus["master-replica-0"], gpus["worker-replica-0"]]) == ["0", "1"]
    assert gpus["ps-replica-0"] == ""
    cores = usable_cores()
    threads = cpu_counts([4, 4, 4], len(cores))  # three n1-standard-4 replicas on this machine
    pinned = bool(pinned_cores(threads, cores))
    for name, report in got.items():
        env = report["env"]
        assert env["TF_FORCE_GPU_ALLOW_GROWTH"] == "true" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert env["TF_NUM_INTRAOP_THREADS"] == env["OMP_NUM_THREADS"] == str(threads[0]), name
        assert env["TF_NUM_INTEROP_THREADS"] == str(max(2, threads[0]))
        assert env["MKL_NUM_THREADS"] == "3"
        assert len(report["cores"]) == (threads[0] if pinned else len(cores)), name
    if pinned:
        every = [core for report in got.values() for core in report["cores"]]
        assert len(every) == len(set(every))  # disjoint

    lines = _service_lines(backend, "share")
    mine = [line for line in lines if line.startswith("Share of this machine: ")]
    assert len(mine) == 3  # said once, one line per replica
    master_line = next(line for line in mine if "master-replica-0" in line)
    assert f"{threads[0]} of {len(cores)} cores" in master_line
    assert f"GPU {gpus['master-replica-0']} (Tesla T4)" in master_line
    assert "Kept as set in the environment, for every replica: MKL_NUM_THREADS=3." in lines
    assert not any("run on its CPU" in line for line in lines)

    notes = backend.describe_notes(backend.get_job("share"))
    assert "Share of this machine:" in notes
    assert any(note.strip() == master_line.removeprefix("Share of this machine: ") for note in notes)


def test_a_job_waits_queued_while_another_holds_the_gpus(
    backend: LocalBackend, home: Path, package_uri: str, two_gpus: None, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_MAX_RUNNING", "4")  # slots are not what it waits for
    holder = training_input(package_uri, "tfcfg.control", job_dir="gs://out/holder", workers=1, runtime=None,
                            masterConfig={"acceleratorConfig": T4}, workerConfig={"acceleratorConfig": T4})
    backend.create_job(make_job("holder", holder))
    wait_for_state(backend.engine, "holder", {JobState.RUNNING})
    waiter = training_input(package_uri, "tfcfg.share", job_dir="gs://out/waiter", runtime=None,
                            masterConfig={"acceleratorConfig": T4})
    backend.create_job(make_job("waiter", waiter))
    waiting = "Waiting for GPUs: the job's replicas need 1 of this machine's 2, 0 are free; other jobs hold the rest."
    wait_until(lambda: waiting in _service_lines(backend, "waiter"), 60, "the waiter to say why it waits")
    assert backend.get_job("waiter").state == JobState.QUEUED

    (local_dir(home, "gs://out/holder") / "release").touch()
    assert wait_for_end(backend.engine, "holder").state == JobState.SUCCEEDED
    done = wait_for_end(backend.engine, "waiter")
    assert done.state == JobState.SUCCEEDED, done.error_message
    assert _shares(home, "gs://out/waiter")["master-replica-0"]["env"]["CUDA_VISIBLE_DEVICES"] == "0"


@pytest.mark.parametrize("setting", ["on", "threads", "off"])
def test_the_cpu_share_setting(
    backend: LocalBackend, home: Path, package_uri: str, monkeypatch: pytest.MonkeyPatch, setting: str,
) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_CPU_SHARE", setting)
    job_id = f"cpu_{setting}"
    inputs = training_input(package_uri, "tfcfg.share", job_dir=f"gs://out/{job_id}", args=["--expect", "2"],
                            workers=1, runtime=None)
    backend.create_job(make_job(job_id, inputs))
    done = wait_for_end(backend.engine, job_id)
    assert done.state == JobState.SUCCEEDED, done.error_message
    cores = usable_cores()
    threads = cpu_counts([4, 4], len(cores))
    got = _shares(home, f"gs://out/{job_id}")
    for name, report in got.items():
        env = report["env"]
        assert env["CUDA_VISIBLE_DEVICES"] == ""  # asked for no GPU: sees none, whatever the setting
        if setting == "off":
            assert env["TF_NUM_INTRAOP_THREADS"] is None and env["OMP_NUM_THREADS"] is None, name
        else:
            assert env["TF_NUM_INTRAOP_THREADS"] == str(threads[0]), name
        pinned = setting == "on" and bool(pinned_cores(threads, cores))
        assert len(report["cores"]) == (threads[0] if pinned else len(cores)), name
    if setting == "on" and pinned_cores(threads, cores):
        assert not set(got["master-replica-0"]["cores"]) & set(got["worker-replica-0"]["cores"])
    expected = f"all {len(cores)} cores (CPU share off)" if setting == "off" else f"{threads[0]} of {len(cores)} cores"
    assert f"Share of this machine: master-replica-0: {expected}" in " ".join(_service_lines(backend, job_id))


def test_more_gpus_than_the_machine_has_is_refused_at_submit(home: Path, two_gpus: None) -> None:
    result = CliRunner().invoke(root, [
        "jobs", "submit", "training", "too_many", "--package-path", str(TRAINERS / "tfcfg"),
        "--module-name", "tfcfg.quick", "--region", "us-central1", "--scale-tier", "custom",
        "--master-machine-type", "n1-standard-4", "--master-accelerator", "type=nvidia-tesla-t4,count=4",
    ], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert "trainingInput.masterConfig.acceleratorConfig.count" in result.stderr
    assert "ask for 4 GPUs in all (master-replica-0 4); this machine has 2" in result.stderr
    assert "ask for at most 2 GPUs in all" in result.stderr
    storage = home / "storage"
    assert not storage.exists() or not any(path.is_file() for path in storage.rglob("*"))
    assert not (home / "jobs.db").exists()

