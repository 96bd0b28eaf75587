"""Project-wide log reads over thousands of jobs: each request reads what its page needs (keyset
pagination over the store's index), so concurrent reads are quick and the server's memory stays
bounded instead of holding every entry it scanned."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

from aiptrain._backends.local.store import JobStore, PendingLine
from aiptrain._job.spec import Job
from aiptrain._job.state import JobState
from aiptrain._replicas.clock import utc_now
from tests.fixtures.emulator import running_emulator

PROJECT = "scale-project"
JOBS = 2_000
LINES = 25
READERS = 8


def _fill(home: Path) -> None:
    store = JobStore(home)
    try:
        first = utc_now() - timedelta(hours=1)
        for index in range(JOBS):
            record = store.insert_job(PROJECT, Job.model_validate({"jobId": f"job_{index:05d}"}), f"token-{index}")
            store.transition(record.key, JobState.SUCCEEDED)
            store.append_logs(record.key, [
                PendingLine(first + timedelta(milliseconds=index * LINES + line), "INFO", "master-replica-0",
                            f"job {index} line {line} " + "x" * 300) for line in range(LINES)])
    finally:
        store.close()


def _resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_concurrent_project_wide_reads_are_quick_and_memory_stays_bounded(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _fill(home)
    with running_emulator(home) as emulator:
        body = json.dumps({"resourceNames": [f"projects/{PROJECT}"], "orderBy": "timestamp desc",
                           "filter": 'resource.type="ml_job"', "pageSize": 1000}).encode()
        request = urllib.request.Request(f"{emulator.url.rstrip('/')}/v2/entries:list", data=body, method="POST",
                                         headers={"Content-Type": "application/json", **emulator.auth_headers()})
        before = _resident_mb(emulator.process.pid)
        answers: list[tuple[float, dict[str, object]]] = []
        errors: list[str] = []

        def read() -> None:
            started = time.monotonic()
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    answers.append((time.monotonic() - started, json.loads(response.read())))
            except urllib.error.HTTPError as error:
                errors.append(f"{error.code}: {error.read().decode(errors='replace')}")

        readers = [threading.Thread(target=read) for _ in range(READERS)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(180)
        after = _resident_mb(emulator.process.pid)
    assert not errors, errors[0]
    assert len(answers) == READERS
    for seconds, answer in answers:
        entries = answer["entries"]
        assert isinstance(entries, list) and len(entries) == 1000
        assert entries[0]["textPayload"].startswith(f"job {JOBS - 1} line {LINES - 1} ")
        assert "nextPageToken" in answer
        assert seconds < 10, seconds
    assert after - before < 100, f"the server grew from {before:.0f} MB to {after:.0f} MB"
