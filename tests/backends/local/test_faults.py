"""Failures, restarts, cancellation, supervisor death and the run-slot limit, with real processes."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._job.spec import JobState
from aiptrain._replicas.processes import is_running
from aiptrain._replicas.replica_set import ReplicaPolicy
from aiptrain.errors import JobAlreadyFinished
from tests.fixtures.engine import max_overlap
from tests.fixtures.local_jobs import (
    PROJECT,
    local_dir,
    make_job,
    processes_gone,
    read_pid,
    token_processes,
    training_input,
    wait_for_end,
    wait_for_state,
    wait_until,
)


def _control_job(engine: LocalJobEngine, package_uri: str, job_id: str, *, args: list[str] | None = None,
                 workers: int = 1) -> str:
    job_dir = f"gs://out/{job_id}"
    engine.submit(PROJECT, make_job(job_id, training_input(package_uri, "tfcfg.control", job_dir=job_dir,
                                                             args=args, workers=workers)))
    return job_dir


def _release(directory: Path) -> None:
    """Let the control trainer's primary finish (its job dir may not exist yet)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "release").touch()


def _messages(engine: LocalJobEngine, job_id: str, task_name: str | None = None) -> list[str]:
    return [entry.message for entry in engine.logs(PROJECT, job_id, task_name=task_name)]


def test_killed_worker_is_restarted_and_the_job_succeeds(engine: LocalJobEngine, home: Path, package_uri: str) -> None:
    directory = local_dir(home, _control_job(engine, package_uri, "restart_worker"))
    first = read_pid(directory / "pids" / "worker-replica-0")
    read_pid(directory / "pids" / "master-replica-0")
    os.kill(first, signal.SIGKILL)
    starts = directory / "starts" / "worker-replica-0"
    wait_until(lambda: len(starts.read_text().split()) == 2, 60, "the worker to start again")
    second = int(starts.read_text().split()[1])
    read_pid(directory / "pids" / "worker-replica-0")  # remembers the restarted worker's identity
    assert second != first
    _release(directory)
    done = wait_for_end(engine, "restart_worker")
    assert done.state == JobState.SUCCEEDED, done.error_message
    assert "worker-replica-0 was killed by signal 9 (SIGKILL); restarting it in 1 s (restart 1 of 3)." in _messages(
        engine, "restart_worker", "service")
    replicas = {r.task_name: r for r in engine.processes(PROJECT, "restart_worker").replicas}
    assert replicas["worker-replica-0"].restarts == 1
    assert replicas["worker-replica-0"].pid == second
    assert replicas["master-replica-0"].exit_code == 0
    assert processes_gone([first, second])


def test_worker_out_of_restarts_fails_the_job_naming_it(
    engine: LocalJobEngine, home: Path, package_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_MAX_RESTARTS", "1")
    directory = local_dir(home, _control_job(engine, package_uri, "flaky_worker"))
    starts = directory / "starts" / "worker-replica-0"
    os.kill(read_pid(directory / "pids" / "worker-replica-0"), signal.SIGKILL)
    wait_until(lambda: starts.exists() and len(starts.read_text().split()) == 2, 60, "a restart")
    os.kill(int(starts.read_text().split()[1]), signal.SIGKILL)
    done = wait_for_end(engine, "flaky_worker")
    assert done.state == JobState.FAILED
    assert done.error_message is not None
    assert done.error_message.startswith(
        "The replica worker 0 was killed by signal 9 (SIGKILL) after 1 restart.")
    master = read_pid(directory / "pids" / "master-replica-0")
    assert processes_gone([master]), "the master must be stopped when the job fails"


def test_restarts_back_off_doubling_each_time(
    engine: LocalJobEngine, home: Path, package_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_RESTART_DELAY", "1.5")
    directory = local_dir(home, _control_job(engine, package_uri, "backoff"))
    starts = directory / "starts" / "worker-replica-0"
    read_pid(directory / "pids" / "worker-replica-0")  # the first start is on record
    gaps = []
    for restart in (1, 2):
        killed_at = time.monotonic()
        os.kill(int(starts.read_text().split()[-1]), signal.SIGKILL)

        def restarted(n: int = restart + 1) -> bool:
            return len(starts.read_text().split()) == n

        wait_until(restarted, 60, f"restart {restart}")
        gaps.append(time.monotonic() - killed_at)
    # Lower bounds only: a loaded machine makes restarts later, never earlier.
    assert gaps[0] >= 1.5 and gaps[1] >= 3.0, gaps
    _release(directory)
    assert wait_for_end(engine, "backoff").state == JobState.SUCCEEDED
    service = _messages(engine, "backoff", "service")
    assert "worker-replica-0 was killed by signal 9 (SIGKILL); restarting it in 1.5 s (restart 1 of 3)." in service
    assert "worker-replica-0 was killed by signal 9 (SIGKILL); restarting it in 3 s (restart 2 of 3)." in service


def test_a_primary_that_fails_because_a_peer_died_restarts_the_whole_cluster(
    engine: LocalJobEngine, home: Path, package_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_RESTART_DELAY", "0.2")
    directory = local_dir(home, _control_job(engine, package_uri, "gang", args=["--fail-if-peer-dies"]))
    master_starts = directory / "starts" / "master-replica-0"
    first_master = read_pid(directory / "pids" / "master-replica-0")
    worker = read_pid(directory / "pids" / "worker-replica-0")
    # Only a death the master saw coming makes it fail (its collectives would have used the peer).
    wait_until(lambda: (directory / "seen" / str(worker)).exists(), 60, "the master to see the worker")
    os.kill(worker, signal.SIGKILL)
    wait_until(lambda: len(master_starts.read_text().split()) == 2, 180, "the master to start again")
    second_master = int(master_starts.read_text().split()[1])
    wait_until(lambda: read_pid(directory / "pids" / "master-replica-0") == second_master, 120, "the new master")
    _release(directory)
    done = wait_for_end(engine, "gang")
    assert done.state == JobState.SUCCEEDED, done.error_message
    service = _messages(engine, "gang", "service")
    assert any(m.startswith("master-replica-0 exited with a non-zero status of 1 after worker-replica-0 failed; "
                            "restarting every replica in 0.2 s") and "(cluster restart 1 of 3)" in m for m in service)
    assert "lost worker-replica-0" in _messages(engine, "gang", "master-replica-0")
    replicas = {r.task_name: r for r in engine.processes(PROJECT, "gang").replicas}
    assert replicas["master-replica-0"].pid == second_master != first_master
    assert replicas["master-replica-0"].restarts == 1


def test_a_primary_failing_with_no_peer_failure_still_fails_the_job(
    engine: LocalJobEngine, home: Path, package_uri: str
) -> None:
    directory = local_dir(home, _control_job(engine, package_uri, "own_fault", args=["--exit-code", "4"]))
    read_pid(directory / "pids" / "worker-replica-0")
    _release(directory)
    done = wait_for_end(engine, "own_fault")
    assert done.state == JobState.FAILED
    assert not any("restarting every replica" in m for m in _messages(engine, "own_fault", "service"))
    assert len((directory / "starts" / "master-replica-0").read_text().split()) == 1


def test_restart_delays_are_capped() -> None:
    policy = ReplicaPolicy(restart_delay=4.0)
    assert [policy.delay_before_restart(n) for n in (1, 2, 3, 4, 5)] == [4.0, 8.0, 16.0, 30.0, 30.0]
    assert ReplicaPolicy(restart_delay=0).delay_before_restart(3) == 0


def test_killed_master_fails_the_job_naming_it_and_the_signal(
    engine: LocalJobEngine, home: Path, package_uri: str
) -> None:
    directory = local_dir(home, _control_job(engine, package_uri, "kill_master", args=["--escapee"]))
    master = read_pid(directory / "pids" / "master-replica-0")
    worker = read_pid(directory / "pids" / "worker-replica-0")
    escapee = read_pid(directory / "escapees" / "worker-replica-0")
    os.kill(master, signal.SIGKILL)
    done = wait_for_end(engine, "kill_master")
    assert done.state == JobState.FAILED
    assert done.error_message is not None
    assert done.error_message.startswith("The replica master 0 was killed by signal 9 (SIGKILL).")
    assert processes_gone([worker, escapee]), "workers and what they started must not outlive the job"
    assert wait_until(lambda: not token_processes(engine, "kill_master"), 10, "no tokened process")


def test_failing_master_reports_its_whole_traceback(engine: LocalJobEngine, home: Path, package_uri: str) -> None:
    directory = local_dir(home, _control_job(engine, package_uri, "boom", workers=0,
                                             args=["--fail-with", "the data file is corrupt"]))
    _release(directory)
    done = wait_for_end(engine, "boom")
    assert done.state == JobState.FAILED
    message = done.error_message or ""
    first, _, rest = message.partition("\n")
    assert first == ("The replica master 0 exited with a non-zero status of 1. "
                     "RuntimeError: the data file is corrupt")
    assert rest.startswith("Traceback (most recent call last):")
    assert rest.rstrip().endswith("RuntimeError: the data file is corrupt")
    assert "[...]" not in message
    errors = [e for e in engine.logs(PROJECT, "boom", task_name="master-replica-0") if e.severity == "ERROR"]
    assert errors[-1].message == "RuntimeError: the data file is corrupt"


def test_non_zero_exit_is_reported_with_its_status(engine: LocalJobEngine, home: Path, package_uri: str) -> None:
    directory = local_dir(home, _control_job(engine, package_uri, "exit_three", workers=0,
                                             args=["--exit-code", "3"]))
    _release(directory)
    done = wait_for_end(engine, "exit_three")
    assert done.state == JobState.FAILED
    assert (done.error_message or "").startswith("The replica master 0 exited with a non-zero status of 3.")
    replicas = engine.processes(PROJECT, "exit_three").replicas
    assert [(r.task_name, r.exit_code, r.signal) for r in replicas] == [("master-replica-0", 3, None)]


def test_killed_supervisor_fails_the_job_on_next_get_and_leaves_no_process(
    engine: LocalJobEngine, home: Path, package_uri: str
) -> None:
    directory = local_dir(home, _control_job(engine, package_uri, "orphaned", args=["--escapee"]))
    pids = [read_pid(directory / "pids" / name) for name in ("master-replica-0", "worker-replica-0")]
    pids += [read_pid(directory / "escapees" / name) for name in ("master-replica-0", "worker-replica-0")]
    supervisor = engine.processes(PROJECT, "orphaned").supervisor_pid
    assert supervisor is not None and is_running(supervisor)
    os.kill(supervisor, signal.SIGKILL)
    assert processes_gone([supervisor])
    job = engine.get(PROJECT, "orphaned")
    assert job.state == JobState.FAILED
    assert job.error_message is not None
    assert job.error_message.startswith(f"The local supervisor of this job (pid {supervisor}) died unexpectedly")
    assert processes_gone(pids, timeout=5), "replicas and their children must die with the supervisor"
    assert token_processes(engine, "orphaned") == []
    assert engine.get(PROJECT, "orphaned").state == JobState.FAILED  # and it stays that way


def test_cancel_stops_a_running_job_and_every_process(engine: LocalJobEngine, home: Path, package_uri: str) -> None:
    directory = local_dir(home, _control_job(engine, package_uri, "to_cancel", args=["--escapee"]))
    pids = [read_pid(directory / "pids" / name) for name in ("master-replica-0", "worker-replica-0")]
    pids.append(read_pid(directory / "escapees" / "worker-replica-0"))
    wait_for_state(engine, "to_cancel", {JobState.RUNNING})
    cancelling = engine.cancel(PROJECT, "to_cancel")
    assert cancelling.state in {JobState.CANCELLING, JobState.CANCELLED}
    done = wait_for_state(engine, "to_cancel", {JobState.CANCELLED}, timeout=10)
    assert done.end_time is not None
    assert processes_gone(pids, timeout=5)
    assert wait_until(lambda: not token_processes(engine, "to_cancel"), 10, "the supervisor to exit")
    history = [change.state for change in engine.state_history(PROJECT, "to_cancel")]
    assert history[-2:] == [JobState.CANCELLING, JobState.CANCELLED]
    with pytest.raises(JobAlreadyFinished):
        engine.cancel(PROJECT, "to_cancel")


def test_cancel_a_queued_job(
    engine: LocalJobEngine, home: Path, package_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_MAX_RUNNING", "1")
    blocker = local_dir(home, _control_job(engine, package_uri, "blocker", workers=0))
    read_pid(blocker / "pids" / "master-replica-0")
    engine.submit(PROJECT, make_job("waiting", training_input(package_uri, "tfcfg.quick", job_dir="gs://out/w")))
    queued = engine.get(PROJECT, "waiting")
    assert queued.state == JobState.QUEUED and queued.job_position == 1
    wait_until(lambda: any("Waiting for a free slot" in m for m in _messages(engine, "waiting")), 30,
               "the supervisor to wait for a slot")
    engine.cancel(PROJECT, "waiting")
    done = wait_for_state(engine, "waiting", {JobState.CANCELLED}, timeout=10)
    assert done.start_time is None
    assert not (local_dir(home, "gs://out/w") / "times.json").exists()
    _release(blocker)
    assert wait_for_end(engine, "blocker").state == JobState.SUCCEEDED


def test_at_most_the_limit_of_jobs_run_at_once(
    engine: LocalJobEngine, home: Path, package_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_MAX_RUNNING", "2")
    ids = [f"batch_{index:02d}" for index in range(20)]
    for job_id in ids:
        engine.submit(PROJECT, make_job(job_id, training_input(package_uri, "tfcfg.quick",
                                                               job_dir=f"gs://out/{job_id}")))
    last = engine.get(PROJECT, ids[-1])
    assert last.state == JobState.QUEUED and (last.job_position or 0) >= 1
    for job_id in ids:
        done = wait_for_end(engine, job_id, timeout=240)
        assert done.state == JobState.SUCCEEDED, (job_id, done.error_message)
    # What the trainers saw: never more than two running at once.
    spans = [json.loads((local_dir(home, f"gs://out/{job_id}") / "times.json").read_text()) for job_id in ids]
    assert max_overlap([(s["start"], s["end"]) for s in spans]) <= 2
    # What the store saw: never more than two jobs between PREPARING and their end.
    slots = []
    for job_id in ids:
        history = engine.state_history(PROJECT, job_id)
        begin = next(c.at for c in history if c.state == JobState.PREPARING)
        slots.append((begin, history[-1].at))
    assert max_overlap(slots) <= 2


def test_evaluator_may_finish_its_last_evaluation(engine: LocalJobEngine, home: Path, package_uri: str) -> None:
    engine.submit(PROJECT, make_job("evaluated", training_input(package_uri, "tfcfg.evaluate_last",
                                                                job_dir="gs://out/evaluated", evaluators=1)))
    done = wait_for_end(engine, "evaluated")
    assert done.state == JobState.SUCCEEDED, done.error_message
    assert (local_dir(home, "gs://out/evaluated") / "evaluated").exists()
    service = _messages(engine, "evaluated", "service")
    assert "Waiting up to 60 s for evaluator-replica-0 to finish." in service
    assert "evaluator-replica-0 exited successfully." in service
    assert not any(m.startswith("Stopping") for m in service)


def test_evaluator_grace_is_bounded(
    engine: LocalJobEngine, home: Path, package_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_EVALUATOR_GRACE", "1")
    engine.submit(PROJECT, make_job("hung_eval", training_input(
        package_uri, "tfcfg.evaluate_last", job_dir="gs://out/hung_eval", evaluators=1,
        args=["--evaluator-hangs"])))
    done = wait_for_end(engine, "hung_eval")
    assert done.state == JobState.SUCCEEDED, done.error_message
    assert not (local_dir(home, "gs://out/hung_eval") / "evaluated").exists()
    service = _messages(engine, "hung_eval", "service")
    assert "Waiting up to 1 s for evaluator-replica-0 to finish." in service
    assert any(m.startswith("Stopping evaluator-replica-0") for m in service)


@pytest.mark.parametrize("outcome", ["cancel", "success"])
def test_a_setsid_grandchild_without_the_run_token_dies_with_the_job(
    engine: LocalJobEngine, home: Path, package_uri: str, outcome: str
) -> None:
    job_id = f"hidden_{outcome}"
    directory = local_dir(home, _control_job(engine, package_uri, job_id, args=["--hidden-escapee"], workers=0))
    escapee = read_pid(directory / "escapees" / "master-replica-0")
    assert is_running(escapee)
    assert "AIPTRAIN_RUN_TOKEN" not in Path(f"/proc/{escapee}/environ").read_bytes().decode(errors="replace")
    if outcome == "cancel":
        wait_for_state(engine, job_id, {JobState.RUNNING})
        engine.cancel(PROJECT, job_id)
        final = {JobState.CANCELLED}
    else:
        _release(directory)
        final = {JobState.SUCCEEDED}
    wait_for_state(engine, job_id, final, timeout=60)
    # The supervisor kills what is below it before it writes the final state: gone by now, not later.
    assert processes_gone([escapee], timeout=0.5), "a setsid-ed, token-less grandchild outlived its job"


def test_a_job_whose_submitter_died_before_starting_its_supervisor_is_started_by_the_next_engine(
    engine: LocalJobEngine, home: Path, package_uri: str
) -> None:
    # What a submitter killed between storing the job and starting its supervisor leaves behind.
    job = make_job("orphaned", training_input(package_uri, "tfcfg.quick", job_dir="gs://out/orphaned"))
    record = engine.store.insert_job(PROJECT, job, "orphanedtoken")
    assert record.supervisor_pid is None
    LocalJobEngine(home)  # any later command: its start-up sweep starts the supervisor at once
    assert engine.store.get_by_key(record.key).supervisor_pid is not None
    assert wait_for_end(engine, "orphaned").state == JobState.SUCCEEDED
    messages = _messages(engine, "orphaned")
    assert any("A run slot is free: the job's supervisor starts now." in message for message in messages)


def test_the_sweep_leaves_a_job_alone_while_its_submitter_is_starting_it(
    engine: LocalJobEngine, home: Path, package_uri: str
) -> None:
    from aiptrain._backends.local.launch import launch_lock

    job = make_job("being_started", training_input(package_uri, "tfcfg.quick", job_dir="gs://out/being_started"))
    with launch_lock(home, "startingtoken"):
        record = engine.store.insert_job(PROJECT, job, "startingtoken")
        assert LocalJobEngine(home).recover_unlaunched() == []
        assert engine.store.get_by_key(record.key).supervisor_pid is None
    assert engine.recover_unlaunched() == ["being_started"]  # the lock is free: its submitter is gone
    assert wait_for_end(engine, "being_started").state == JobState.SUCCEEDED
