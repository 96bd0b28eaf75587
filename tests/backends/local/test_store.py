"""The job store and the engine's read side: uniqueness, listing, filters, scale, log cursors, slots."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from aiptrain._backends.local.filters import compile_filter
from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._backends.local.store import JobStore, PendingLine
from aiptrain._job.filters import parse_filter
from aiptrain._job.spec import Job, JobState, TrainingInput
from aiptrain.errors import AlreadyExists, NotFound, UsageError
from tests.fixtures.local_jobs import PROJECT, make_job, training_input
from tests.job.test_filters import JOBS as FILTER_JOBS
from tests.job.test_filters import TABLE as FILTER_TABLE


def _stored(store: JobStore, job_id: str, state: JobState = JobState.SUCCEEDED, **labels: str) -> int:
    """A job in the store without a supervisor, moved straight to `state`."""
    job = Job.model_validate({"jobId": job_id, "labels": labels or None,
                              "trainingInput": {"scaleTier": "BASIC", "region": "us-central1"}})
    record = store.insert_job(PROJECT, job, "token")
    if state != JobState.QUEUED:
        store.transition(record.key, state)
    return record.key


def test_concurrent_submits_of_one_id_give_one_job(engine: LocalJobEngine, package_uri: str) -> None:
    barrier = threading.Barrier(8)
    results: list[str] = []

    def submit() -> None:
        barrier.wait()
        try:
            engine.submit(PROJECT, make_job("same_id", training_input(package_uri, "tfcfg.quick")))
            results.append("created")
        except AlreadyExists as error:
            assert error.exit_code == 1
            assert error.hint is not None and "another job ID" in error.hint and "--job-id" not in error.hint
            results.append("exists")

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["created"] + ["exists"] * 7
    jobs, _ = engine.list(PROJECT)
    assert [job.job_id for job in jobs] == ["same_id"]


def _insert_in_process(home: str, barrier: multiprocessing.synchronize.Barrier,
                       queue: multiprocessing.Queue[str]) -> None:
    store = JobStore(Path(home))
    barrier.wait()
    try:
        store.insert_job(PROJECT, Job.model_validate({"jobId": "raced"}), "t")
        queue.put("created")
    except AlreadyExists:
        queue.put("exists")


def test_concurrent_inserts_from_processes_give_one_job(home: Path) -> None:
    JobStore(home)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    queue = context.Queue()
    processes = [context.Process(target=_insert_in_process, args=(str(home), barrier, queue)) for _ in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert sorted(queue.get(timeout=5) for _ in range(4)) == ["created", "exists", "exists", "exists"]


def test_same_id_in_two_projects_is_fine(home: Path) -> None:
    store = JobStore(home)
    store.insert_job("a", Job.model_validate({"jobId": "x"}), "t")
    store.insert_job("b", Job.model_validate({"jobId": "x"}), "t")
    assert store.get("a", "x").key != store.get("b", "x").key
    with pytest.raises(NotFound):
        store.get("c", "x")


def test_store_file_is_private_and_in_wal_mode(home: Path) -> None:
    store = JobStore(home)
    assert (home.stat().st_mode & 0o777) == 0o700
    assert (store.path.stat().st_mode & 0o777) == 0o600
    assert store.connection().execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_list_pages_newest_first_and_filters(home: Path) -> None:
    engine = LocalJobEngine(home)
    store = engine.store
    for index in range(5):
        _stored(store, f"census_{index}", JobState.FAILED if index % 2 else JobState.SUCCEEDED, team="nlp")
    _stored(store, "other_job", JobState.CANCELLED)
    jobs, token = engine.list(PROJECT, page_size=4)
    assert [job.job_id for job in jobs] == ["other_job", "census_4", "census_3", "census_2"]
    assert token is not None
    rest, token = engine.list(PROJECT, page_size=4, page_token=token)
    assert [job.job_id for job in rest] == ["census_1", "census_0"]
    assert token is None
    failed, _ = engine.list(PROJECT, filter="jobId:census* AND state:FAILED")
    assert [job.job_id for job in failed] == ["census_3", "census_1"]
    assert [j.job_id for j in engine.list(PROJECT, filter="state=CANCELLED")[0]] == ["other_job"]
    assert len(engine.list(PROJECT, filter="labels.team:nlp")[0]) == 5
    assert engine.list(PROJECT, filter='jobId="census_2"')[0][0].job_id == "census_2"
    assert engine.list(PROJECT, filter="jobId:nothing*")[0] == []
    assert engine.list("another-project")[0] == []


@pytest.mark.parametrize("bad", ["state=NOPE", "jobId census", "(jobId:a", "jobId:a AND state=FAILED OR jobId:b"])
def test_bad_filters_are_usage_errors(home: Path, bad: str) -> None:
    with pytest.raises(UsageError):
        LocalJobEngine(home).list(PROJECT, filter=bad)


def test_bad_page_token_is_a_usage_error(home: Path) -> None:
    with pytest.raises(UsageError):
        LocalJobEngine(home).list(PROJECT, page_token="garbage!")


def test_ten_thousand_jobs_list_and_describe_use_indexes_only(home: Path) -> None:
    engine = LocalJobEngine(home)
    for index in range(10_000):
        _stored(engine.store, f"job_{index:05d}", JobState.SUCCEEDED)
    engine.store.append_logs(engine.store.get(PROJECT, "job_00001").key,
                             [PendingLine(datetime.now(UTC), "INFO", "service", "a line")])
    statements: list[str] = []
    connection = engine.store.connection()
    connection.set_trace_callback(statements.append)
    jobs, token = engine.list(PROJECT, page_size=100)
    engine.list(PROJECT, page_size=100, page_token=token)
    engine.list(PROJECT, page_size=50, filter="state:SUCCEEDED")
    described = engine.get(PROJECT, "job_04242")
    connection.set_trace_callback(None)
    assert [job.job_id for job in jobs][:2] == ["job_09999", "job_09998"] and len(jobs) == 100
    assert described.job_id == "job_04242"
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert selects
    assert not any(" logs" in s for s in selects), "listing or describing must not read logs"
    for statement in selects:
        plan = connection.execute("EXPLAIN QUERY PLAN " + statement).fetchall()
        details = [row[3] for row in plan]
        full_scans = [d for d in details if d.startswith("SCAN") and "INDEX" not in d]
        assert not full_scans, f"{statement!r} scans a table: {details}"


def test_log_cursor_reads_only_newer_entries_in_order(home: Path) -> None:
    store = JobStore(home)
    key = _stored(store, "logged", JobState.RUNNING)
    base = datetime.now(UTC)
    # Captured out of order and with a shared timestamp: the store orders and clamps them.
    store.append_logs(key, [PendingLine(base + timedelta(seconds=1), "INFO", "master-replica-0", "second"),
                            PendingLine(base, "INFO", "master-replica-0", "first")])
    store.append_logs(key, [PendingLine(base, "ERROR", "worker-replica-0", "late but stamped early")])
    entries = store.read_logs(key)
    assert [e.message for e in entries] == ["first", "second", "late but stamped early"]
    assert entries[2].timestamp == entries[1].timestamp  # clamped: never before what readers have seen
    keys = [(e.timestamp, e.insert_id) for e in entries]
    assert keys == sorted(keys) and len(set(keys)) == 3
    assert [e.message for e in store.read_logs(key, after=entries[0].cursor)] == ["second", "late but stamped early"]
    assert store.read_logs(key, after=entries[2].cursor) == []
    assert [e.message for e in store.read_logs(key, task_name="worker-replica-0")] == ["late but stamped early"]
    assert [e.message for e in store.read_logs(key, limit=1)] == ["first"]


def _grab_slot(home: str, key: int, limit: int, barrier: multiprocessing.synchronize.Barrier,
               queue: multiprocessing.Queue[tuple[int, bool]]) -> None:
    store = JobStore(Path(home))
    barrier.wait()
    queue.put((key, store.try_acquire_slot(key, limit)))


def test_slot_acquisition_is_race_free_across_processes(home: Path) -> None:
    store = JobStore(home)
    keys = [_stored(store, f"waiting_{index}", JobState.QUEUED) for index in range(6)]
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(keys))
    queue = context.Queue()
    processes = [context.Process(target=_grab_slot, args=(str(home), key, 2, barrier, queue)) for key in keys]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    granted = sorted(key for key, ok in (queue.get(timeout=5) for _ in keys) if ok)
    assert granted == keys[:2]  # exactly the limit, first come first served
    holders = store.connection().execute("SELECT COUNT(*) FROM jobs WHERE holds_slot = 1").fetchone()[0]
    assert holders == 2
    # A third job gets a slot once one holder ends.
    store.transition(keys[0], JobState.SUCCEEDED)
    assert store.try_acquire_slot(keys[2], 2)
    assert not store.try_acquire_slot(keys[3], 2)


def test_queue_position_counts_waiting_jobs_ahead(home: Path) -> None:
    engine = LocalJobEngine(home)
    keys = [_stored(engine.store, f"q_{index}", JobState.QUEUED) for index in range(3)]
    assert engine.store.try_acquire_slot(keys[0], 1)
    assert engine.store.get_by_key(keys[0]).job.job_position == 0
    assert [engine.store.queue_position(k) for k in keys[1:]] == [1, 2]


def test_finished_jobs_never_change_state(home: Path) -> None:
    store = JobStore(home)
    key = _stored(store, "done", JobState.SUCCEEDED)
    assert store.transition(key, JobState.FAILED) is None
    assert store.request_cancel(key).state == JobState.SUCCEEDED
    history = [change.state for change in store.state_history(key)]
    assert history == [JobState.QUEUED, JobState.SUCCEEDED]


def test_update_resource_keeps_service_fields(home: Path) -> None:
    store = JobStore(home)
    key = _stored(store, "tuned", JobState.RUNNING)

    def mark(job: Job) -> None:
        annotation = type(job).model_fields["training_output"].annotation
        assert annotation is not None
        job.training_output = job.training_output or annotation.__args__[0]()
        job.training_output.completed_trial_count = 2

    store.update_resource(key, mark)
    store.transition(key, JobState.SUCCEEDED)
    job = store.get_by_key(key).job
    assert job.to_api()["trainingOutput"] == {"completedTrialCount": "2"}
    assert job.end_time and job.end_time.endswith("Z")
    with pytest.raises(sqlite3.IntegrityError):
        store.connection().execute("INSERT INTO jobs (project, job_id, state, resource, run_token, created_epoch)"
                                   " VALUES (?, 'tuned', 'QUEUED', '{}', 't', 0)", (PROJECT,))


def test_a_store_made_before_the_vertex_column_gains_it_and_keeps_its_jobs(tmp_path: Path) -> None:
    """A jobs.db of an earlier release (no vertex_job_id column) opens, keeps its rows and can hold
    jobs of both origins; jobs that run Vertex AI jobs are told apart by that column, not a label."""
    old = sqlite3.connect(tmp_path / "jobs.db")
    old.execute("CREATE TABLE jobs (key INTEGER PRIMARY KEY AUTOINCREMENT, project TEXT NOT NULL, "
                "job_id TEXT NOT NULL, state TEXT NOT NULL, resource TEXT NOT NULL, "
                "holds_slot INTEGER NOT NULL DEFAULT 0, cancel_requested INTEGER NOT NULL DEFAULT 0, "
                "supervisor_pid INTEGER, supervisor_start_ticks INTEGER, run_token TEXT NOT NULL, "
                "created_epoch REAL NOT NULL, UNIQUE (project, job_id))")
    old.execute("INSERT INTO jobs (project, job_id, state, resource, run_token, created_epoch) "
                "VALUES (?, 'before', 'SUCCEEDED', '{\"jobId\": \"before\"}', 't', 1.0)", (PROJECT,))
    old.commit()
    old.close()

    store = JobStore(tmp_path)
    assert store.get(PROJECT, "before").vertex_job_id is None
    store.insert_job(PROJECT, Job.model_validate({"jobId": "customjob_1234"}), "t2", vertex_job_id="1234")
    _stored(store, "plain")
    assert store.get(PROJECT, "customjob_1234").vertex_job_id == "1234"
    assert store.get(PROJECT, "customjob_1234").job.labels is None
    assert store.vertex_job_ids(PROJECT) == {"customjob_1234": "1234"}
    assert [r.job_id for r in store.list_jobs(PROJECT, limit=10, vertex=False)] == ["plain", "before"]
    assert [r.job_id for r in store.list_jobs(PROJECT, limit=10, vertex=True)] == ["customjob_1234"]
    store.close()
    # Opened again, the upgraded store is left as it is.
    assert JobStore(tmp_path).get(PROJECT, "customjob_1234").vertex_job_id == "1234"


@pytest.mark.parametrize(("expression", "expected"), FILTER_TABLE)
def test_the_sql_a_filter_becomes_keeps_every_match(tmp_path: Path, expression: str, expected: list[str]) -> None:
    """The store narrows a listing with what SQL can say of a filter; it must never drop a match
    (the engine applies the whole filter afterwards, so the listing is exact)."""
    engine = LocalJobEngine(tmp_path)
    for resource in FILTER_JOBS:
        record = engine.store.insert_job(PROJECT, Job.model_validate({"jobId": resource["jobId"],
                                                                      "labels": resource.get("labels")}), "t")
        engine.store.transition(record.key, JobState(resource["state"]))

        def with_fields(job: Job, resource: dict[str, Any] = resource) -> None:
            job.create_time = resource["createTime"]
            job.training_input = TrainingInput.model_validate(resource["trainingInput"])
            job.job_position = resource.get("jobPosition")

        engine.store.update_resource(record.key, with_fields)
    job_filter = parse_filter(expression)
    condition = compile_filter(job_filter)
    narrowed = {r.job_id for r in engine.store.list_jobs(PROJECT, limit=100, where=condition.where,
                                                        params=condition.params)}
    stored = {r.job_id: r.job.to_api() for r in engine.store.list_jobs(PROJECT, limit=100)}
    assert {job_id for job_id, resource in stored.items() if job_filter.matches(resource)} == set(expected)
    assert set(expected) <= narrowed
    assert sorted(str(job.job_id) for job in engine.list(PROJECT, filter=expression)[0]) == expected
