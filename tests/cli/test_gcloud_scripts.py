"""What shell scripts written for gcloud do, run against the local backend with the real command:
--format projections, --filter, global flags anywhere, and messages on stderr.

The jobs are made once for the module (three tiny trainers); each test runs `python -m aiptrain`
in a subprocess and checks the exit code, stdout and stderr apart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TRAINER = 'import sys\nprint("hi", flush=True)\nif sys.argv[1:] == ["fail"]:\n    raise SystemExit("gave up")\n'
JOBS = {"census_a": ("ok", "team=census"), "census_b": ("fail", "team=census,env=dev"),
        "other_c": ("ok", "team=other")}


def aiptrain(home: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # The module's jobs are made before any test's own environment: the trainers run on the test's
    # interpreter here too (the scripts' output is what is tested, not a runtime's environment).
    full_env = {**os.environ, "AIPTRAIN_HOME": str(home), "AIPTRAIN_LOCAL_PYTHON": sys.executable, **(env or {})}
    return subprocess.run([sys.executable, "-m", "aiptrain", *argv], capture_output=True, text=True,
                          timeout=240, env=full_env)


@pytest.fixture(scope="module")
def trainer_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    package = tmp_path_factory.mktemp("scripts") / "proj" / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text(TRAINER)
    return package


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, trainer_package: Path) -> Path:
    package = trainer_package
    home = tmp_path_factory.mktemp("scripts-home")
    for job_id, (mode, labels) in JOBS.items():
        submitted = aiptrain(home, "jobs", "submit", "training", job_id, "--package-path", str(package),
                             "--module-name", "trainer.task", "--region", "us-central1", "--labels", labels,
                             "--", mode)
        assert submitted.returncode == 0, submitted.stderr
    for job_id in JOBS:
        assert aiptrain(home, "jobs", "wait", job_id, "--timeout", "200").returncode in (0, 10)
    return home


def test_describe_value_state_is_the_ci_gate(home: Path) -> None:
    result = aiptrain(home, "jobs", "describe", "census_b", "--format", "value(state)")
    assert (result.returncode, result.stdout, result.stderr) == (0, "FAILED\n", "")
    nested = aiptrain(home, "jobs", "describe", "census_b", "--format",
                      "value(trainingInput.region,labels.env,labels)")
    assert nested.stdout == "us-central1\tdev\tenv=dev;team=census\n"


def test_list_formats(home: Path) -> None:
    values = aiptrain(home, "jobs", "list", "--format", "value(jobId,state)")
    assert values.returncode == 0 and values.stderr == ""
    assert values.stdout == "other_c\tSUCCEEDED\ncensus_b\tFAILED\ncensus_a\tSUCCEEDED\n"
    table = aiptrain(home, "jobs", "list", "--format", "table(jobId,state,labels.team:label=TEAM)")
    # `state` is headed STATUS, the label `jobs list`'s own table gives it (gcloud's rule).
    assert table.stdout.splitlines() == ["JOB_ID    STATUS     TEAM", "other_c   SUCCEEDED  other",
                                         "census_b  FAILED     census", "census_a  SUCCEEDED  census"]
    csv = aiptrain(home, "jobs", "list", "--format", "csv[no-heading](jobId,trainingInput.region)")
    assert csv.stdout == "other_c,us-central1\ncensus_b,us-central1\ncensus_a,us-central1\n"
    default = aiptrain(home, "jobs", "list", "--format", "[no-heading]")
    assert [line.split()[:2] for line in default.stdout.splitlines()] == [
        ["other_c", "SUCCEEDED"], ["census_b", "FAILED"], ["census_a", "SUCCEEDED"]]
    flattened = aiptrain(home, "jobs", "list", "--format", "text", "--limit", "1")
    assert flattened.stdout.startswith("---\njobId:")
    assert "labels.team:" in flattened.stdout
    assert aiptrain(home, "jobs", "list", "--format", "none").stdout == ""


def test_bad_format_is_refused_with_exit_2(home: Path) -> None:
    result = aiptrain(home, "jobs", "list", "--format", "tabel(jobId)")
    assert result.returncode == 2 and result.stdout == ""
    assert "error: --format: 'tabel' is not a format" in result.stderr
    assert "hint: use one of:" in result.stderr


def test_filters_on_the_command_line(home: Path) -> None:
    def listed(expression: str) -> list[str]:
        result = aiptrain(home, "jobs", "list", "--filter", expression, "--format", "value(jobId)")
        assert result.returncode == 0, result.stderr
        return sorted(result.stdout.split())

    assert listed("state=(FAILED SUCCEEDED)") == ["census_a", "census_b", "other_c"]
    assert listed("state=FAILED OR jobId:other*") == ["census_b", "other_c"]
    assert listed("NOT state=FAILED") == ["census_a", "other_c"]
    assert listed("-state=FAILED AND labels.team=census") == ["census_a"]
    assert listed("(state=FAILED OR labels.team=other) AND jobId~_[bc]$") == ["census_b", "other_c"]
    assert listed("labels.env:*") == ["census_b"]
    bad = aiptrain(home, "jobs", "list", "--filter", "state=FAILED AND jobId:a OR jobId:b")
    assert bad.returncode == 2 and bad.stdout == ""
    assert "parenthes" in bad.stderr


def test_listed_0_items_goes_to_stderr(home: Path) -> None:
    result = aiptrain(home, "jobs", "list", "--filter", "state=RUNNING")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "Listed 0 items.\n")
    as_json = aiptrain(home, "jobs", "list", "--filter", "state=RUNNING", "--format", "json")
    assert (as_json.stdout, as_json.stderr) == ("[]\n", "")


def test_global_flags_before_or_after_the_command(home: Path) -> None:
    before = aiptrain(home, "--format", "json", "jobs", "list")
    after = aiptrain(home, "jobs", "list", "--format", "json")
    between = aiptrain(home, "jobs", "--format", "json", "list")
    assert before.returncode == after.returncode == between.returncode == 0
    assert json.loads(before.stdout) == json.loads(after.stdout) == json.loads(between.stdout)
    # The command's own flag wins over one given before it, and over the environment.
    both = aiptrain(home, "--format", "json", "jobs", "list", "--format", "value(jobId)",
                    env={"AIPTRAIN_FORMAT": "yaml"})
    assert both.stdout.split() == ["other_c", "census_b", "census_a"]
    from_env = aiptrain(home, "jobs", "describe", "census_a", env={"AIPTRAIN_FORMAT": "value(jobId)"})
    assert from_env.stdout == "census_a\n"
    before_env = aiptrain(home, "--format", "value(state)", "jobs", "describe", "census_a",
                          env={"AIPTRAIN_FORMAT": "json"})
    assert before_env.stdout == "SUCCEEDED\n"


def test_verbosity_and_quiet(home: Path) -> None:
    noisy = aiptrain(home, "jobs", "describe", "census_a")
    assert "View logs with" in noisy.stderr
    for flags in (["--verbosity", "error"], ["--quiet"], ["--verbosity=none", "--format", "yaml"]):
        quiet = aiptrain(home, *flags, "jobs", "describe", "census_a")
        assert quiet.returncode == 0 and quiet.stderr == "", flags
        assert "jobId: census_a" in quiet.stdout
    bad = aiptrain(home, "jobs", "list", "--verbosity", "loud")
    assert bad.returncode == 2 and "--verbosity" in bad.stderr


def test_update_labels_on_the_local_backend(home: Path, trainer_package: Path) -> None:
    # A project of its own, so that the other tests' listings stay as they are.
    project = {"AIPTRAIN_PROJECT": "labels-project"}
    assert aiptrain(home, "jobs", "submit", "training", "labelled", "--package-path", str(trainer_package),
                    "--module-name", "trainer.task", "--region", "us-central1", "--labels", "a=1,b=2",
                    env=project).returncode == 0
    updated = aiptrain(home, "jobs", "update", "labelled", "--update-labels", "c=3,a=9", "--remove-labels", "b",
                       "--format", "value(labels)", env=project)
    assert (updated.returncode, updated.stdout, updated.stderr) == (0, "a=9;c=3\n", "Updated job [labelled].\n")
    same = aiptrain(home, "jobs", "update", "labelled", "--update-labels", "a=9", env=project)
    assert (same.returncode, same.stdout, same.stderr) == (0, "", "No update to perform.\n")
    cleared = aiptrain(home, "jobs", "update", "labelled", "--clear-labels", "--update-labels", "z=0",
                       "--format", "value(labels)", env=project)
    assert cleared.stdout == "z=0\n"


@pytest.mark.parametrize(("flags", "wanted"), [
    ([], "error: nothing to update"),
    (["--update-labels", "Bad=x"], "labels.Bad: invalid label key 'Bad'"),
    (["--update-labels", "novalue"], "--update-labels: 'novalue' is not KEY=VALUE"),
    (["--clear-labels", "--remove-labels", "a"], "--remove-labels: cannot be combined with --clear-labels"),
    (["--update-labels", "a=1", "--remove-labels", "a"], "both updated and removed"),
])
def test_bad_updates_change_nothing_and_exit_2(home: Path, flags: list[str], wanted: str) -> None:
    before = aiptrain(home, "jobs", "describe", "census_b", "--format", "json").stdout
    refused = aiptrain(home, "jobs", "update", "census_b", *flags)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert wanted in refused.stderr
    assert aiptrain(home, "jobs", "describe", "census_b", "--format", "json").stdout == before


def test_update_of_a_missing_job_exits_1(home: Path) -> None:
    missing = aiptrain(home, "jobs", "update", "no_such_job", "--clear-labels")
    assert missing.returncode == 1 and "no_such_job" in missing.stderr and missing.stdout == ""


def test_stream_logs_as_json_lines_with_tail_and_since(home: Path) -> None:
    everything = aiptrain(home, "jobs", "stream-logs", "census_b", "--format", "json")
    assert everything.returncode == 10  # the exit code follows the job, which FAILED
    entries = [json.loads(line) for line in everything.stdout.splitlines()]
    assert len(entries) > 3
    assert all(set(entry) == {"timestamp", "severity", "task", "message"} for entry in entries)
    assert {"severity": "ERROR", "task": "master-replica-0", "message": "gave up"} in [
        {k: v for k, v in entry.items() if k != "timestamp"} for entry in entries]
    assert all(entry["timestamp"].endswith("Z") for entry in entries)
    tail = aiptrain(home, "jobs", "logs", "census_b", "--tail", "2", "--format", "json")
    assert [json.loads(line) for line in tail.stdout.splitlines()] == entries[-2:]
    assert aiptrain(home, "jobs", "logs", "census_b", "--tail", "0").stdout == ""
    since = aiptrain(home, "jobs", "logs", "census_b", "--since", "1d", "--format", "value(severity,message)")
    assert since.stdout.splitlines() == [f"{e['severity']}\t{e['message']}" for e in entries]
    middle = entries[len(entries) // 2]["timestamp"]
    after = aiptrain(home, "jobs", "logs", "census_b", "--since", middle, "--format", "json")
    assert [json.loads(line) for line in after.stdout.splitlines()] == [e for e in entries if e["timestamp"] > middle]
    future = aiptrain(home, "jobs", "logs", "census_b", "--since", "2999-01-01T00:00:00Z")
    assert (future.returncode, future.stdout) == (10, "")


def test_stream_logs_refuses_what_cannot_stream(home: Path) -> None:
    for flags, wanted in ((["--since", "yesterday"], "--since"), (["--tail", "-1"], "--tail"),
                          (["--format", "table(message)"], "error: --format: table needs every line")):
        refused = aiptrain(home, "jobs", "logs", "census_b", *flags)
        assert (refused.returncode, refused.stdout) == (2, ""), flags
        assert wanted in refused.stderr


def test_list_uri_prints_each_jobs_resource_uri(home: Path) -> None:
    result = aiptrain(home, "jobs", "list", "--uri", "--filter", "labels.team=census")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.splitlines() == [
        f"https://ml.googleapis.com/v1/projects/local-project/jobs/{job_id}" for job_id in ("census_b", "census_a")]


@pytest.mark.parametrize("argv", [["jobs", "list", "--format", "value(jobId)"],
                                  ["jobs", "stream-logs", "census_a", "--format", "json"]])
def test_a_reader_that_went_away_ends_the_command_quietly(home: Path, argv: list[str]) -> None:
    # `aiptrain ... | head -1` once head has gone: the pipe has no reader left, so the first write
    # fails. aiptrain ends as a command killed by SIGPIPE does (141), without a traceback.
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "AIPTRAIN_HOME": str(home), "AIPTRAIN_DEBUG": ""}
    try:
        result = subprocess.run([sys.executable, "-m", "aiptrain", *argv], stdout=write_end,
                                stderr=subprocess.PIPE, text=True, timeout=120, env=env)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (141, "")
