"""`gcloud logging read` reaches every line of a large job's log, newest first as well as oldest first,
for one job and project-wide."""

from __future__ import annotations

import json

import pytest

from tests.e2e.gcloud.harness import PROJECT, GcloudSession
from tests.fixtures.large_logs import finished_job_with_lines

pytestmark = [pytest.mark.gcloud, pytest.mark.timeout(900)]

LINES = 60_000


@pytest.fixture(scope="module")
def large_job(gcloud: GcloudSession) -> str:
    finished_job_with_lines(gcloud.home, PROJECT, "g_large", LINES)
    return "g_large"


def _read(gcloud: GcloudSession, *args: str) -> list[str]:
    result = gcloud.run("logging", "read", *args, "--format", "json", "--freshness", "1d")
    assert result.returncode == 0, str(result)
    return [str(entry["textPayload"]) for entry in json.loads(result.stdout)]


def test_newest_first_reaches_the_newest_lines_of_one_job(gcloud: GcloudSession, large_job: str) -> None:
    assert _read(gcloud, f'resource.labels.job_id="{large_job}"', "--limit", "3") == [
        f"line {LINES - 1}", f"line {LINES - 2}", f"line {LINES - 3}"]


def test_newest_first_reaches_the_newest_lines_project_wide(gcloud: GcloudSession, large_job: str) -> None:
    assert _read(gcloud, 'resource.type="ml_job"', "--limit", "2") == [f"line {LINES - 1}", f"line {LINES - 2}"]


def test_a_filter_matching_only_old_lines_is_found_newest_first(gcloud: GcloudSession, large_job: str) -> None:
    assert _read(gcloud, f'resource.labels.job_id="{large_job}" AND textPayload="line 7"') == ["line 7"]


def test_oldest_first_starts_at_the_first_line(gcloud: GcloudSession, large_job: str) -> None:
    assert _read(gcloud, f'resource.labels.job_id="{large_job}"', "--order", "asc", "--limit", "2") == [
        "line 0", "line 1"]
