"""gcloud's global flags on aiptrain's command lines: accepted, applied where they mean something
(the REST backends send them), noted at --verbosity info otherwise; --flags-file as gcloud reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from aiptrain._backends.base import RequestOptions
from aiptrain._backends.mlv1.client import with_request_options
from aiptrain._cli.main import root
from tests.fixtures.emulator import running_emulator


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(root, list(args))
    return result.exit_code, result.stdout, result.stderr


def dry_run(trainer: Path, *args: str) -> dict:  # type: ignore[type-arg]
    code, out, err = run("jobs", "submit", "training", "flags_job", "--package-path", str(trainer),
                         "--module-name", "trainer.task", "--dry-run", "--format", "json", *args)
    assert code == 0, err
    document: dict = json.loads(out)  # type: ignore[type-arg]
    return document


def test_a_flags_file_sets_flags_where_it_stands(trainer: Path, tmp_path: Path) -> None:
    flags = tmp_path / "flags.yaml"
    flags.write_text(yaml.safe_dump({
        "--region": "europe-west4",
        "--labels": {"team": "nlp", "cost": "low"},  # a mapping: KEY=VALUE,...
        "--scale-tier": "BASIC",
        "--use-chief-in-tf-config": True,  # a YAML boolean, as the flag's word
        "--enable-web-access": None,  # an empty value sets a switch
    }))
    body = dry_run(trainer, f"--flags-file={flags}")["request"]
    assert body["trainingInput"]["region"] == "europe-west4"
    assert body["labels"] == {"cost": "low", "team": "nlp"}
    assert body["trainingInput"]["useChiefInTfConfig"] is True
    assert body["trainingInput"]["enableWebAccess"] is True
    # What follows the file on the command line wins.
    later = dry_run(trainer, "--flags-file", str(flags), "--region", "us-east1")["request"]
    assert later["trainingInput"]["region"] == "us-east1"


def test_a_list_of_mappings_repeats_a_flag_and_files_nest(trainer: Path, tmp_path: Path) -> None:
    inner = tmp_path / "inner.yaml"
    inner.write_text("--region: us-central1\n")
    outer = tmp_path / "outer.json"
    outer.write_text(json.dumps([{"--labels": "a=1"}, {"--labels": "b=2"}, {"--flags-file": "inner.yaml"}]))
    body = dry_run(trainer, f"--flags-file={outer}")["request"]
    assert body["labels"] == {"a": "1", "b": "2"}
    assert body["trainingInput"]["region"] == "us-central1"


@pytest.mark.parametrize(("content", "message"), [
    ("region: x\n", "is not a flag"),
    ("- just text\n", "expected a mapping"),
    ("--region: [unclosed\n", "not valid YAML"),
    ("--flags-file: self.yaml\n", "includes itself"),
])
def test_bad_flags_files_are_usage_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "self.yaml"
    path.write_text(content)
    code, _, err = run("jobs", "list", f"--flags-file={path}")
    assert code == 2
    assert message in err
    code, _, err = run("jobs", "list", "--flags-file", str(tmp_path / "missing.yaml"))
    assert code == 2 and "cannot read" in err


def test_flags_without_meaning_here_are_accepted_and_noted_at_info() -> None:
    code, _, err = run("jobs", "list", "--account", "me@example.com", "--billing-project", "bill-me",
                       "--trace-token", "abc", "--impersonate-service-account", "sa@p.iam.gserviceaccount.com",
                       "--verbosity", "info")
    assert code == 0, err
    assert "--account me@example.com is not used" in err
    assert "--billing-project has no effect on the local backend" in err
    assert "--trace-token has no effect on the local backend" in err
    code, _, quiet = run("jobs", "list", "--account", "me@example.com")
    assert code == 0 and "is not used" not in quiet


def test_user_output_can_be_turned_off() -> None:
    assert "Listed 0 items." in run("jobs", "list")[2]
    code, _, err = run("jobs", "list", "--no-user-output-enabled")
    assert code == 0 and "Listed 0 items." not in err
    assert "Listed 0 items." in run("--user-output-enabled", "jobs", "list")[2]


def test_the_rest_backends_send_the_billing_project_and_the_trace_token(tmp_path: Path) -> None:
    with running_emulator(tmp_path / "home", no_auth=True) as emulator:
        code, _, err = run("jobs", "list", "--backend", "mlv1", "--project", "flags-project",
                           "--api-endpoint", emulator.url, "--billing-project", "bill-me", "--trace-token", "t0k",
                           "--log-http")
    assert code == 0, err
    request = next(line for line in err.splitlines() if "-> GET" in line and "/jobs" in line)
    assert "'X-Goog-User-Project': 'bill-me'" in request or "'x-goog-user-project': 'bill-me'" in request
    assert "trace=token%3At0k" in request


def test_request_options_change_uri_and_headers() -> None:
    uri, headers = with_request_options("https://ml.googleapis.com/v1/projects/p/jobs?alt=json", {},
                                        RequestOptions(billing_project="b", trace_token="x y"))
    assert uri == "https://ml.googleapis.com/v1/projects/p/jobs?alt=json&trace=token%3Ax+y"
    assert headers == {"X-Goog-User-Project": "b"}
    assert with_request_options("u", {}, RequestOptions()) == ("u", {})
