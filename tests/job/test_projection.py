"""`--format` expressions and `--flatten`: the parser, its refusals, one record per list item (the
text each format prints is in tests/cli/test_formats.py)."""

from __future__ import annotations

from typing import Any

import pytest

from aiptrain._job.projection import Key, Transform, flatten_resources, parse_format
from aiptrain.errors import UsageError

JOBS: list[dict[str, Any]] = [
    {"jobId": "census_b", "state": "FAILED", "labels": {"team": "nlp", "env": "dev"},
     "trainingInput": {"scaleTier": "BASIC", "args": ["--epochs", "3"]}, "createTime": "2024-01-02T03:04:05Z"},
    {"jobId": "census_a", "state": "SUCCEEDED", "trainingInput": {"scaleTier": "CUSTOM"},
     "createTime": "2024-01-01T00:00:00.123456789Z"},
]


def test_the_parser_reads_names_attributes_keys_transforms_and_key_attributes() -> None:
    fmt = parse_format("table[no-heading,title='My jobs',pad=3](jobId.basename(), labels.team:label=TEAM,"
                       " createTime.date('%Y', tz=UTC):sort=1:reverse, trainingInput.args[0], x[])")
    assert fmt.name == "table"
    assert fmt.attributes == {"heading": False, "title": "My jobs", "pad": "3"}
    assert fmt.keys[0] == Key(("jobId",), (Transform("basename"),))
    assert fmt.keys[1].attribute("label") == "TEAM"
    assert fmt.keys[2].transforms == (Transform("date", ("%Y",), (("tz", "UTC"),)),)
    assert fmt.keys[2].attribute("sort") == "1" and fmt.keys[2].attribute("reverse") is True
    assert fmt.keys[3].path == ("trainingInput", "args", 0)
    assert fmt.keys[4].path == ("x", "[]")
    assert parse_format("text").name == "flattened" and parse_format("default").name == "yaml"
    assert parse_format("[no-heading]").name == ""


@pytest.mark.parametrize(("expression", "wanted"), [
    ("tabel(jobId)", "'tabel' is not a format"),
    ("table(jobId", "expected ')'"),
    ("value()", "value needs the keys"),
    ("table", "table needs the keys"),
    ("value(jobId.nosuch())", "unknown transform nosuch()"),
    ("value(jobId:sort=first)", "sort="),
    ("value(a[x])", "list index"),
    ("json extra", "unexpected text"),
    ("value(a.basename().b)", "cannot go on after a transform"),
])
def test_bad_expressions_are_usage_errors_naming_the_flag(expression: str, wanted: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_format(expression)
    assert raised.value.message.startswith("--format: ")
    assert wanted in raised.value.message
    assert raised.value.exit_code == 2 and raised.value.hint


def test_flatten_makes_one_record_per_list_item() -> None:
    tuning: dict[str, Any] = {"jobId": "t", "trainingOutput": {"trials": [{"trialId": "1"}, {"trialId": "2"}]}}
    flat = flatten_resources([tuning, JOBS[1]], ["trainingOutput.trials"])
    assert [(r["jobId"], r.get("trainingOutput")) for r in flat] == [
        ("t", {"trials": {"trialId": "1"}}), ("t", {"trials": {"trialId": "2"}}), ("census_a", None)]
    assert tuning["trainingOutput"]["trials"][0] == {"trialId": "1"}  # the input is left as it was
    assert flatten_resources([JOBS[0]], ["trainingInput.args[]"]) == [
        {**JOBS[0], "trainingInput": {**JOBS[0]["trainingInput"], "args": arg}} for arg in ("--epochs", "3")]
    with pytest.raises(UsageError, match="--flatten"):
        flatten_resources(JOBS, ["a..b!"])
