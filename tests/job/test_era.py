"""The day a job's packages resolve as of: the runtime's, unless a label or the setting moves it."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from aiptrain._job import era
from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import parse_job
from aiptrain._job.validate import validate_job

CATALOG = load_catalog()
RUNTIME = CATALOG.runtimes["1.15"]


def test_a_runtimes_day_is_its_last_day_of_support_and_uv_gets_the_next_midnight_in_utc() -> None:
    day = era.resolve_day(RUNTIME, None, {})
    assert day.day == datetime.date(2020, 12, 19)
    assert day.exclude_newer == "2020-12-20T00:00:00Z"  # a bare date would be read in local time
    assert day.origin == "runtime 1.15's day: 12 months after its release on 2019-12-19"
    bound = era.resolve_day(CATALOG.runtimes["2.2"], None, {})
    assert bound.origin.endswith("release on or after 2020-05-07")  # the release is only bounded


def test_the_label_wins_over_the_setting_which_wins_over_the_runtime() -> None:
    labels = {era.LABEL: "2021-06-30"}
    assert era.resolve_day(RUNTIME, labels, {era.SETTING: "2022-01-01"}) == era.ResolveDay(
        datetime.date(2021, 6, 30), "the job's label aiptrain-resolve-as-of")
    assert era.resolve_day(RUNTIME, {}, {era.SETTING: "2022-01-01"}).day == datetime.date(2022, 1, 1)
    today = era.resolve_day(RUNTIME, {era.LABEL: "today"}, {})
    assert today.day is None and today.exclude_newer is None and today.label == "today"
    assert "today's index" in today.line()


def test_an_environment_standing_in_for_the_runtime_resolves_against_today_unless_told() -> None:
    assert era.resolve_day(RUNTIME, None, {}, stands_in=True).day is None
    assert era.resolve_day(RUNTIME, {era.LABEL: "2021-01-31"}, {}, stands_in=True).day == datetime.date(2021, 1, 31)


def test_the_line_names_the_day_its_origin_and_how_to_move_it() -> None:
    line = era.resolve_day(RUNTIME, None, {}).line()
    assert line == ("Trainer packages resolve as of 2020-12-19 (runtime 1.15's day: 12 months after its release on "
                    "2019-12-19): nothing published later is installed; move the day with the label "
                    "aiptrain-resolve-as-of or AIPTRAIN_RESOLVE_AS_OF.")
    assert era.from_json(era.resolve_day(RUNTIME, None, {}).to_json()) == era.resolve_day(RUNTIME, None, {})


@pytest.mark.parametrize("value", ["2021-6-30", "20210630", "2021-02-30", "yesterday", "2021-06-30T00:00"])
def test_a_bad_day_is_refused_at_submit_naming_the_label_and_the_form(value: str) -> None:
    data: dict[str, Any] = {"jobId": "j", "labels": {era.LABEL: value.lower().replace(":", "-")},
                            "trainingInput": {"region": "us-central1", "pythonModule": "t.task",
                                              "packageUris": ["gs://my-bucket/t.tar.gz"]}}
    (problem,) = validate_job(parse_job(data), CATALOG)
    assert problem.path == f"labels.{era.LABEL}"
    assert "is not a day as YYYY-MM-DD" in problem.message
    assert problem.hint == "use e.g. aiptrain-resolve-as-of=2021-06-30, or aiptrain-resolve-as-of=today"
    assert era.setting_problem({era.SETTING: value}) is not None
    assert era.setting_problem({era.SETTING: "2021-06-30"}) is None and era.setting_problem({}) is None
