"""The `--filter` language against a table of expressions and the jobs each selects.

The same table runs through the local store's SQL (tests/backends/local/test_store.py) so that what the
store narrows server-side never loses a job the filter matches.
"""

from __future__ import annotations

from typing import Any

import pytest

from aiptrain._job.filter_syntax import And, Not, Or, Term
from aiptrain._job.filters import parse_filter
from aiptrain.errors import UsageError

JOBS: list[dict[str, Any]] = [
    {"jobId": "census_1", "state": "FAILED", "labels": {"team": "nlp", "env": "dev"},
     "trainingInput": {"scaleTier": "BASIC", "args": ["--epochs", "3"], "region": "us-central1"},
     "createTime": "2024-01-02T03:04:05Z", "jobPosition": "0"},
    {"jobId": "census_2", "state": "SUCCEEDED", "labels": {"team": "vision"},
     "trainingInput": {"scaleTier": "CUSTOM", "region": "europe-west1"},
     "createTime": "2024-03-01T00:00:00Z", "jobPosition": "12"},
    {"jobId": "rnn_A", "state": "CANCELLED",
     "trainingInput": {"scaleTier": "BASIC_GPU", "region": "us-central1"},
     "createTime": "2023-12-31T23:59:59Z"},
]

TABLE = [
    # equality ignores case; no wildcards with =
    ("state=FAILED", ["census_1"]),
    ("state=failed", ["census_1"]),
    ("jobId=census*", []),
    ("state!=FAILED", ["census_2", "rnn_A"]),
    # lists: any of
    ("state=(FAILED SUCCEEDED)", ["census_1", "census_2"]),
    ("state=(FAILED,CANCELLED)", ["census_1", "rnn_A"]),
    ("state!=(FAILED SUCCEEDED)", ["rnn_A"]),
    ("jobId:(rnn census_2)", ["census_2", "rnn_A"]),
    # `:` contains, or matches whole with `*`, ignoring case
    ("jobId:census", ["census_1", "census_2"]),
    ("jobId:census*", ["census_1", "census_2"]),
    ("jobId:*_a", ["rnn_A"]),
    ("jobId:sus*", []),
    ("jobId:c?nsus*", []),
    ("labels.team:*", ["census_1", "census_2"]),
    ("-labels.team:*", ["rnn_A"]),
    ("labels:env", ["census_1"]),
    ("trainingInput.args:epochs", ["census_1"]),
    ("trainingInput.args=3", ["census_1"]),
    # logic
    ("state=FAILED OR jobId:rnn*", ["census_1", "rnn_A"]),
    ("NOT state=FAILED", ["census_2", "rnn_A"]),
    ("-state=FAILED", ["census_2", "rnn_A"]),
    ("NOT (state=FAILED OR state=CANCELLED)", ["census_2"]),
    ("jobId:census AND labels.team=nlp", ["census_1"]),
    ("jobId:census labels.team=vision", ["census_2"]),
    ("trainingInput.region=us-central1 state=FAILED OR state=CANCELLED", ["census_1", "rnn_A"]),
    ("(state=FAILED OR state=SUCCEEDED) AND labels.team:vis*", ["census_2"]),
    ("NOT NOT state=FAILED", ["census_1"]),
    # ordering: numbers as numbers, times as text (RFC 3339 sorts in time order)
    ("createTime>2024-01-01", ["census_1", "census_2"]),
    ("createTime<=2024-01-02T03:04:05Z", ["census_1", "rnn_A"]),
    ("jobPosition>2", ["census_2"]),
    ("jobPosition<2", ["census_1"]),
    ("jobPosition>=0", ["census_1", "census_2"]),
    # regular expressions
    ("jobId~^census_[0-9]$", ["census_1", "census_2"]),
    ("jobId!~census", ["rnn_A"]),
    ('trainingInput.scaleTier~"^BASIC"', ["census_1", "rnn_A"]),
    # quoting and missing keys
    ('labels."team"="nlp"', ["census_1"]),
    ("labels.team='vision'", ["census_2"]),
    ("labels.nosuch=x", []),
    ("labels.nosuch!=x", ["census_1", "census_2", "rnn_A"]),
    ("", ["census_1", "census_2", "rnn_A"]),
]


@pytest.mark.parametrize(("expression", "expected"), TABLE)
def test_expressions_select_the_expected_jobs(expression: str, expected: list[str]) -> None:
    job_filter = parse_filter(expression)
    assert [job["jobId"] for job in JOBS if job_filter.matches(job)] == expected


def test_precedence_and_shape() -> None:
    assert parse_filter("a=1 b=2 OR c=3").root == And((Term(("a",), "=", ("1",)), Or((
        Term(("b",), "=", ("2",)), Term(("c",), "=", ("3",))))))
    assert parse_filter("-a:*").root == Not(Term(("a",), ":", ("*",)))
    assert parse_filter("a=(x y)").root == Term(("a",), "=", ("x", "y"), is_list=True)
    assert parse_filter('labels."a.b"=1').root == Term(("labels", "a.b"), "=", ("1",))
    assert parse_filter("createTime>2024-01-01T00:00:00Z").root == Term(("createTime",), ">",
                                                                         ("2024-01-01T00:00:00Z",))


@pytest.mark.parametrize(("expression", "wanted"), [
    ("state=FAILED AND jobId:a OR jobId:b", "parentheses are required when AND and OR are combined"),
    ("state=FAILD", "'FAILD' is not a job state"),
    ("jobId census", "expected an operator"),
    ("jobId=", "a value is missing"),
    ("(state=FAILED", "'(' is not closed"),
    ("state=FAILED)", "unexpected ')'"),
    ("state=(FAILED", "not closed"),
    ("state=()", "empty"),
    ('jobId~"("', "is not a regular expression"),
    ("jobId>(a b)", "a list of values"),
    ("=x", "expected a key"),
    ('jobId="x', "quoted string is not closed"),
    ("NOT", "a term is missing"),
    ("(" * 100 + "a=1" + ")" * 100, "nest more than"),
])
def test_bad_filters_are_usage_errors_naming_the_flag(expression: str, wanted: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_filter(expression)
    assert raised.value.message.startswith("--filter: ")
    assert wanted in raised.value.message
    assert raised.value.exit_code == 2 and raised.value.hint
