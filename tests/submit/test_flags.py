"""Flag value parsers: each mistake names the flag and says what to type instead."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from aiptrain._job.catalog import load_catalog
from aiptrain._submit import flags
from aiptrain.errors import ProblemList


@pytest.mark.parametrize("call", [
    lambda out: flags.parse_accelerator("--master-accelerator", "type=nvidia-tesla-t4,count=two", out, load_catalog()),
    lambda out: flags.parse_accelerator("--master-accelerator", "type=nvidia-tesla-t4,count=0", out, load_catalog()),
    lambda out: flags.parse_accelerator("--master-accelerator", "type=nvidia-tesla-t4", out, load_catalog()),
    lambda out: flags.parse_accelerator("--master-accelerator", "type=x,count=1", out, load_catalog()),
    lambda out: flags.parse_count("--worker-count", -1, out),
    lambda out: flags.parse_scale_tier("huge", out, load_catalog()),
    lambda out: flags.parse_bool_word("--use-chief-in-tf-config", "maybe", out),
    lambda out: flags.parse_labels(("team",), out),
    lambda out: flags.kms_key_name(None, "ring", "us", "p", out),
    lambda out: flags.kms_key_name("key", None, None, "p", out),
    lambda out: flags.group_pair(out, "--worker-machine-type", None, "--worker-count", 2),
])
def test_every_flag_problem_has_a_hint(call: Callable[[ProblemList], object]) -> None:
    out = ProblemList()
    call(out)
    (problem,) = out.problems
    assert problem.path.startswith("--")
    assert (problem.hint or "").strip()


def test_negative_count_hint_names_the_flag() -> None:
    out = ProblemList()
    assert flags.parse_count("--worker-count", -1, out) is None
    assert out.problems[0].hint == "pass --worker-count 1 or more, or leave --worker-count out"


def test_scale_tiers_and_accelerators_are_the_catalogs() -> None:
    catalog = load_catalog()
    for tier in catalog.tiers:
        out = ProblemList()
        assert flags.parse_scale_tier(tier.replace("_", "-").lower(), out, catalog) == tier
        assert out.problems == []
    for accelerator in catalog.accelerators:
        out = ProblemList()
        spelled = accelerator.replace("_", "-").lower()
        assert flags.parse_accelerator("--master-accelerator", f"type={spelled},count=1", out, catalog) == (
            accelerator, 1)
    # A catalog without a tier refuses it and lists what it has.
    smaller = dataclasses.replace(catalog, tiers={k: v for k, v in catalog.tiers.items() if k != "BASIC_TPU"})
    out = ProblemList()
    assert flags.parse_scale_tier("basic-tpu", out, smaller) is None
    (problem,) = out.problems
    assert "basic-tpu" not in (problem.hint or "") and "basic-gpu" in (problem.hint or "")
