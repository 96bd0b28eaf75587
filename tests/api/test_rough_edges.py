"""The Python API refuses what Python lets a caller write by mistake, naming the argument: a string
where a list of arguments belongs, a timeout that is not a number of seconds, a limit below one;
and reads a big job's log a page at a time with `aiptrain.iter_logs`."""

from __future__ import annotations

import math
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import aiptrain
from tests.fixtures.engine import home
from tests.fixtures.large_logs import finished_job_with_lines

__all__ = ["home"]

REMOTE: dict[str, Any] = {"packages": ["gs://aiptrain-test/trainer-0.1.tar.gz"], "module_name": "trainer.task",
          "region": "us-central1"}


def _problems(**arguments: Any) -> list[str]:
    with pytest.raises(aiptrain.ValidationFailed) as refused:
        aiptrain.dry_run("edges", **{**REMOTE, **arguments})
    return [problem.render() for problem in refused.value.problems]


def test_args_as_one_string_is_refused_with_the_list_it_means() -> None:
    assert _problems(args="--epochs 3 --name 'a b'") == [
        "args: \"--epochs 3 --name 'a b'\" is one string, not a list of the trainer's arguments "
        "(pass each argument as its own string: args=['--epochs', '3', '--name', 'a b'])"]


@pytest.mark.parametrize(("args", "named"), [
    (["--epochs", 3], "args[1]: 3 is not text"),
    ({"epochs": "3"}, "args: {'epochs': '3'} is not a list of the trainer's arguments"),
    (b"--epochs", "args: b'--epochs' is not a list of the trainer's arguments"),
])
def test_args_that_are_not_a_list_of_texts_are_refused(args: Any, named: str) -> None:
    [problem] = _problems(args=args)
    assert problem.startswith(named)


def test_args_as_a_list_or_tuple_are_the_trainers_arguments() -> None:
    for args in (["--epochs", "3"], ("--epochs", "3")):
        document = aiptrain.dry_run("edges", **REMOTE, args=args)
        assert document["request"]["trainingInput"]["args"] == ["--epochs", "3"]


def test_packages_as_one_string_is_the_command_lines_text() -> None:
    document = aiptrain.dry_run("edges", **{**REMOTE, "packages": "gs://aiptrain-test/trainer-0.1.tar.gz"})
    assert document["request"]["trainingInput"]["packageUris"] == ["gs://aiptrain-test/trainer-0.1.tar.gz"]


@pytest.mark.parametrize("timeout", [math.nan, -5, -0.5, math.inf, True, "60"])
def test_a_wait_timeout_that_is_not_seconds_is_refused(home: Path, timeout: Any) -> None:
    finished_job_with_lines(home, "local-project", "ended", 1)
    with pytest.raises(aiptrain.UsageError) as refused:
        aiptrain.wait("ended", timeout=timeout)
    assert refused.value.message == f"wait: timeout must be a number of seconds, 0 or more, not {timeout!r}"
    assert "timeout=None" in (refused.value.hint or "")


def test_a_wait_of_zero_seconds_on_an_ended_job_returns_it(home: Path) -> None:
    finished_job_with_lines(home, "local-project", "ended", 1)
    assert str(aiptrain.wait("ended", timeout=0).state) == "SUCCEEDED"


@pytest.mark.parametrize(("arguments", "message"), [
    ({"limit": -1}, "list: limit must be a whole number 1 or more, not -1"),
    ({"limit": 0}, "list: limit must be a whole number 1 or more, not 0"),
    ({"limit": 2.5}, "list: limit must be a whole number 1 or more, not 2.5"),
])
def test_a_limit_below_one_is_refused_naming_it(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(aiptrain.UsageError) as refused:
        aiptrain.list(**arguments)
    assert refused.value.message == message


def test_a_page_size_out_of_range_is_refused_naming_it() -> None:
    with pytest.raises(aiptrain.UsageError, match="list: page_size must be a whole number from 1 to 1000, not 0"):
        aiptrain.Client().list(page_size=0)


def test_iter_logs_is_public_and_reads_a_page_at_a_time(home: Path) -> None:
    assert "iter_logs" in aiptrain.__all__
    finished_job_with_lines(home, "local-project", "big", 10_000, width=200)
    next(aiptrain.iter_logs("big"))  # what the first read imports is not the log's

    tracemalloc.start()
    try:
        count = 0
        for entry in aiptrain.iter_logs("big"):
            assert entry.message.startswith(f"line {count}.")
            count += 1
        _, iterated_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        listed = aiptrain.logs("big")
        _, listed_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == len(listed) == 10_000
    assert iterated_peak * 3 < listed_peak  # about 2 pages against 10
