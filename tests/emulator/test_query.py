"""The filter language the emulator serves: what gcloud, the backends and Vertex list calls send."""

from __future__ import annotations

from typing import Any

import pytest

from aiptrain._backends.mlv1 import logs as _logs
from aiptrain._emulator.query import FilterError, parse_filter, timestamp_ns
from aiptrain._job.filter_syntax import And, Not, Or, Term
from aiptrain._job.filters import parse_filter as parse_gcloud_filter
from aiptrain._job.logs import LogCursor
from aiptrain.errors import UsageError


def entry(ts: str, insert_id: str, task: str = "master-replica-0", job: str = "j1") -> dict[str, Any]:
    return {"resource": {"type": "ml_job", "labels": {"job_id": job, "task_name": task}},
            "labels": {"task_name": task, "ml.googleapis.com/task_name": task},
            "timestamp": ts, "insertId": insert_id, "severity": "WARNING"}


GCLOUD = ('(resource.type="ml_job" OR resource.type="cloudml_job") AND resource.labels.job_id="j1" '
          'AND timestamp>="1970-01-01T01:00:00.000000000Z" AND timestamp<"2024-01-02T03:04:00.000000Z"')


def test_gcloud_first_poll() -> None:
    f = parse_filter(GCLOUD)
    assert f.matches(entry("2024-01-02T03:03:59.999999Z", "1"))
    assert not f.matches(entry("2024-01-02T03:04:00Z", "1"))  # the 5 s lag bound
    assert not f.matches(entry("2024-01-02T03:03:00Z", "1", job="j2"))
    assert f.lower_bound_ns() == timestamp_ns("1970-01-01T01:00:00Z")


def test_cursor_clause_of_the_backends() -> None:
    cursor = LogCursor(_logs.parse_timestamp("2024-01-02T03:04:05.000007Z"), "00000000000000000005")
    text = _logs.job_filter('resource.type="ml_job"', "j1", after=cursor, task_name="worker-replica-0")
    f = parse_filter(text)
    same_time = "2024-01-02T03:04:05.000007Z"
    assert not f.matches(entry(same_time, "00000000000000000005", "worker-replica-0"))
    assert f.matches(entry(same_time, "00000000000000000006", "worker-replica-0"))
    assert f.matches(entry("2024-01-02T03:04:05.000008Z", "00000000000000000001", "worker-replica-0"))
    assert not f.matches(entry("2024-01-02T03:04:05.000008Z", "00000000000000000009", "master-replica-0"))
    assert f.lower_bound_ns() == timestamp_ns(same_time)


def test_nanosecond_timestamps_compare_exactly() -> None:
    f = parse_filter('timestamp>"2024-01-02T03:04:05.123456789Z"')
    assert not f.matches(entry("2024-01-02T03:04:05.123456789Z", "1"))
    assert f.matches(entry("2024-01-02T03:04:05.12345679Z", "1"))
    assert f.matches(entry("2024-01-02T04:04:05.2+01:00", "1"))


def test_or_binds_tighter_than_and_and_juxtaposition_is_and() -> None:
    f = parse_filter('resource.labels.job_id="j1" resource.labels.task_name="a" OR resource.labels.task_name="b"')
    assert f.matches(entry("2024-01-01T00:00:00Z", "1", task="b"))
    assert not f.matches(entry("2024-01-01T00:00:00Z", "1", task="b", job="j2"))


def test_not_severity_quoted_label_keys_and_has() -> None:
    record = entry("2024-01-01T00:00:00Z", "1", task="ps-replica-1")
    assert parse_filter("severity>=WARNING").matches(record)
    assert not parse_filter("severity>ERROR").matches(record)
    assert parse_filter('labels."ml.googleapis.com/task_name"="ps-replica-1"').matches(record)
    assert parse_filter('NOT resource.labels.task_name="master-replica-0"').matches(record)
    assert parse_filter("resource.labels.task_name:ps").matches(record)
    assert parse_filter("resource.labels.task_name:ps-*").matches(record)
    assert not parse_filter("labels.trial_id=1").matches(record)  # missing field
    assert parse_filter("labels:task_name").matches(record)


def test_aip160_list_filters() -> None:
    record = {"display_name": "my_job", "state": "JOB_STATE_SUCCEEDED", "labels": {"team": "nlp"},
              "create_time": "2024-05-18T10:00:00Z"}
    assert parse_filter('display_name="my_job"').matches(record)
    assert parse_filter('display_name:"my_*"').matches(record)
    assert parse_filter('state!="JOB_STATE_FAILED" AND labels.team=nlp').matches(record)
    assert parse_filter("labels.team:*").matches(record)
    assert not parse_filter("labels.other:*").matches(record)
    time_fields = frozenset({"create_time"})
    assert parse_filter('create_time>"2021-05-18T00:00:00Z"', time_fields=time_fields).matches(record)
    assert parse_filter("").matches(record)


@pytest.mark.parametrize("text", ['resource.type="x', "(a=1", "a=", "a b", "=1", 'a=1 )'])
def test_bad_filters(text: str) -> None:
    with pytest.raises(FilterError):
        parse_filter(text)


def test_lower_bound_needs_every_alternative() -> None:
    assert parse_filter('timestamp>"2024-01-01T00:00:00Z" OR severity=ERROR').lower_bound_ns() is None
    assert parse_filter('NOT timestamp<"2024-01-01T00:00:00Z"').lower_bound_ns() is None
    both = parse_filter('timestamp>="2024-01-01T00:00:00Z" AND timestamp>="2024-02-01T00:00:00Z"')
    assert both.lower_bound_ns() == timestamp_ns("2024-02-01T00:00:00Z")


def test_the_logging_language_and_gcloud_s_parse_into_one_tree() -> None:
    text = 'NOT (a=1 OR b="2") c:x'
    tree = And((Not(Or((Term(("a",), "=", ("1",)), Term(("b",), "=", ("2",))))), Term(("c",), ":", ("x",))))
    assert parse_filter(text).root == tree
    assert parse_gcloud_filter(text).root == tree


def test_an_explicit_and_binds_below_or_in_the_logging_language_only() -> None:
    text = "a=1 AND b=2 OR c=3"
    assert parse_filter(text).root == And((Term(("a",), "=", ("1",)), Or((
        Term(("b",), "=", ("2",)), Term(("c",), "=", ("3",))))))
    with pytest.raises(UsageError, match="parentheses are required"):
        parse_gcloud_filter(text)


def test_nesting_is_bounded_in_the_logging_language_too() -> None:
    with pytest.raises(FilterError, match="more than 64 deep"):
        parse_filter("NOT " * 70 + "a=1")
    assert parse_filter("NOT " * 63 + "a=1").matches({"a": "2"})
