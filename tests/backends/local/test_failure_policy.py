"""Which failures end a job at once and which restart replicas, and whom the errorMessage names."""

from __future__ import annotations

from pathlib import Path

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._job.spec import JobState
from tests.fixtures.local_jobs import PROJECT, local_dir, make_job, read_pid, training_input, wait_for_end


def _service_lines(engine: LocalJobEngine, job_id: str) -> list[str]:
    return [entry.message for entry in engine.logs(PROJECT, job_id, task_name="service")]


def test_a_crash_on_import_fails_a_standard_1_job_in_one_attempt_naming_the_master(
    engine: LocalJobEngine, package_uri: str
) -> None:
    inputs = training_input(package_uri, "tfcfg.import_crash", job_dir="gs://out/import_crash")
    for key in ("masterType",):
        inputs.pop(key)
    inputs["scaleTier"] = "STANDARD_1"
    engine.submit(PROJECT, make_job("import_crash", inputs))
    done = wait_for_end(engine, "import_crash")
    assert done.state == JobState.FAILED
    first_line, _, rest = (done.error_message or "").partition("\n")
    assert first_line == ("The replica master 0 exited with a non-zero status of 1. "
                          "AttributeError: module 'collections' has no attribute 'Mapping'")
    assert rest.startswith("Traceback (most recent call last):")
    replicas = engine.processes(PROJECT, "import_crash").replicas
    assert len(replicas) == 8  # STANDARD_1: master, 4 workers, 3 parameter servers
    assert all(replica.restarts == 0 for replica in replicas), [(r.task_name, r.restarts) for r in replicas]
    assert not any("restarting" in line for line in _service_lines(engine, "import_crash"))


def test_a_workers_own_error_ends_the_job_at_once_naming_that_worker(
    engine: LocalJobEngine, home: Path, package_uri: str
) -> None:
    job_dir = "gs://out/worker_bug"
    engine.submit(PROJECT, make_job("worker_bug", training_input(
        package_uri, "tfcfg.control", job_dir=job_dir, workers=1,
        args=["--secondary-fail-with", "shard 7 is missing"])))
    directory = local_dir(home, job_dir)
    master = read_pid(directory / "pids" / "master-replica-0")
    done = wait_for_end(engine, "worker_bug")
    assert done.state == JobState.FAILED
    assert (done.error_message or "").startswith(
        "The replica worker 0 exited with a non-zero status of 1. RuntimeError: shard 7 is missing\n")
    assert len((directory / "starts" / "worker-replica-0").read_text().split()) == 1, "never restarted"
    replicas = {r.task_name: r for r in engine.processes(PROJECT, "worker_bug").replicas}
    assert replicas["master-replica-0"].pid == master
    assert replicas["master-replica-0"].signal is not None, "the master was stopped, it did not fail"

