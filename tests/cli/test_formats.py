"""`--format` output: the text each format prints from the values its keys select (the parser and
`--flatten` are in tests/job/test_projection.py)."""

from __future__ import annotations

import json
from typing import Any

import yaml

from aiptrain._cli.formats import render
from aiptrain._job.projection import Format, parse_format
from tests.job.test_projection import JOBS


def out_with(fmt: Format, resources: list[dict[str, Any]]) -> str:
    return render(resources, fmt, many=True)


def out(expression: str, resources: list[dict[str, Any]] | dict[str, Any]) -> str:
    many = isinstance(resources, list)
    return render(resources if isinstance(resources, list) else [resources], parse_format(expression), many=many)


def test_value_prints_tab_separated_records_with_lists_and_maps_joined() -> None:
    assert out("value(state)", JOBS[0]) == "FAILED\n"
    assert out("value(jobId,trainingInput.scaleTier,labels.team)", JOBS) == \
        "census_b\tBASIC\tnlp\ncensus_a\tCUSTOM\t\n"
    assert out("value(trainingInput.args,labels)", JOBS[0]) == "--epochs;3\tteam=nlp;env=dev\n"
    assert out('value[separator=",",terminator="|"](jobId,state)', JOBS) == "census_b,FAILED|census_a,SUCCEEDED|"
    assert out("value[delimiter=' '](trainingInput.args)", JOBS[0]) == "--epochs 3\n"


def test_csv_has_a_lower_case_heading_and_quotes_what_needs_it() -> None:
    resource = {"jobId": "a,b", "errorMessage": 'said "no"', "trainingInput": {"args": ["x,y", "z"]}}
    assert out("csv(jobId,errorMessage:label=ERROR,trainingInput.args)", [resource]) == \
        'job_id,error,args\n"a,b","said ""no""","x,y";z\n'
    # Each item of a list is quoted on its own (gcloud's way), not the joined field.
    assert out("csv[separator=';',no-heading](trainingInput.args)", JOBS[0]) == "--epochs;3\n"
    assert out("csv[no-heading,separator=';'](jobId,state)", JOBS) == "census_b;FAILED\ncensus_a;SUCCEEDED\n"


def test_table_headings_are_angry_snake_case_and_disambiguated() -> None:
    assert out("table(jobId,trainingInput.scaleTier,labels.team:label=TEAM)", JOBS).splitlines() == [
        "JOB_ID    SCALE_TIER  TEAM", "census_b  BASIC       nlp", "census_a  CUSTOM"]
    assert out("table(first.name,last.name)", [{"first": {"name": "a"}, "last": {"name": "b"}}]).splitlines()[0] \
        == "NAME  LAST_NAME"
    assert out("table[no-heading](jobId)", JOBS) == "census_b\ncensus_a\n"
    assert out("table(jobId)", []) == ""
    # Maps and lists in a table print as Python writes them, as gcloud's tables do.
    assert out("table[no-heading](jobId,labels,trainingInput.args)", JOBS[0]) == \
        "census_b  {'team': 'nlp', 'env': 'dev'}  ['--epochs', '3']\n"


def test_keys_take_the_labels_of_the_commands_default_format() -> None:
    default = parse_format("table(jobId.basename(),state:label=STATUS)")
    fmt = parse_format("csv(jobId,state,labels.team)").labelled_like(default)
    assert out_with(fmt, JOBS[:1]) == "job_id,status,team\ncensus_b,FAILED,nlp\n"
    assert parse_format("table(state:label=S)").labelled_like(default).headings() == ["S"]


def test_sort_and_reverse_key_attributes_order_rows() -> None:
    assert out("value(jobId:sort=1)", JOBS) == "census_a\ncensus_b\n"
    assert out("value(jobId:sort=1:reverse)", list(reversed(JOBS))) == "census_b\ncensus_a\n"


def test_transforms() -> None:
    assert out("value(createTime.date('%Y-%m-%d %H:%M:%S', tz=UTC))", JOBS) == \
        "2024-01-02 03:04:05\n2024-01-01 00:00:00\n"
    assert out("value(jobId.upper(),trainingInput.args.len(),trainingInput.args.join(' '))", JOBS[0]) == \
        "CENSUS_B\t2\t--epochs 3\n"
    assert out("value(name.basename())", {"name": "projects/p/jobs/j1"}) == "j1\n"


def test_json_and_yaml_keep_whole_resources_or_project_keys() -> None:
    assert json.loads(out("json", JOBS)) == JOBS
    assert json.loads(out("json", JOBS[0])) == JOBS[0]
    # A key the resource lacks is left out, as gcloud leaves it out.
    assert json.loads(out("json(jobId,labels.team)", JOBS)) == [
        {"jobId": "census_b", "labels": {"team": "nlp"}}, {"jobId": "census_a"}]
    documents = list(yaml.safe_load_all(out("yaml(jobId,state)", JOBS)))
    assert documents == [{"jobId": "census_b", "state": "FAILED"}, {"jobId": "census_a", "state": "SUCCEEDED"}]
    assert out("yaml[no-undefined](jobId,endTime)", JOBS[0]) == "jobId: census_b\n"


def test_flattened_aligns_dotted_keys_and_opens_each_listed_resource() -> None:
    assert out("text", JOBS[1]).splitlines() == [
        "jobId:                   census_a", "state:                   SUCCEEDED",
        "trainingInput.scaleTier: CUSTOM", "createTime:              2024-01-01T00:00:00.123456789Z"]
    listed = out("text", JOBS).splitlines()
    assert listed[0] == "---" and listed.count("---") == 2
    assert "trainingInput.args[1]:   3" in listed
    assert out("flattened[no-pad](jobId,state)", JOBS[0]) == "job_id: census_b\nstate: FAILED\n"


def test_list_and_none() -> None:
    assert out("list(jobId,state)", JOBS) == " - census_b\n   FAILED\n - census_a\n   SUCCEEDED\n"
    assert out("none", JOBS) == ""
