"""Table of hostile command lines: each is refused with exit 2 (1 for an operational refusal), a
message naming the field, no traceback, nothing staged and no job created.

Counting the figures: every case of `INVOCATIONS` is one tried invocation; a passing case is one
handled cleanly (`pytest tests/e2e/hardening -k invocation -q` prints both).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from aiptrain._cli.main import root
from tests.cli.test_bad_invocations import created_jobs, make_trainer, stored_objects

# argv after the program name, built from (tmp dir, package dir); {job} etc. are filled in.
Argv = Callable[[Path, Path], list[str]]


def submit(*extra: str, job: str = "ok_job") -> Argv:
    return lambda tmp, pkg: ["jobs", "submit", "training", job, "--package-path", str(pkg), "--module-name",
                             "trainer.task", "--region", "us-central1", *extra]


def with_config(content: str | bytes | dict[str, object], *extra: str) -> Argv:
    def build(tmp: Path, pkg: Path) -> list[str]:
        path = tmp / "config.yaml"
        if isinstance(content, dict):
            path.write_text(yaml.safe_dump(content))
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return submit("--config", str(path), *extra)(tmp, pkg)

    return build


def with_file(name: str, content: bytes, flag: str) -> Argv:
    def build(tmp: Path, pkg: Path) -> list[str]:
        path = tmp / name
        path.write_bytes(content)
        return submit(flag, str(path))(tmp, pkg)

    return build


def tuning(**param: object) -> dict[str, object]:
    spec = {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.01, "maxValue": 0.1, **param}
    return {"trainingInput": {"hyperparameters": {"goal": "MAXIMIZE", "maxTrials": 2, "params": [spec]}}}


def container_config(extra: dict[str, object]) -> Argv:
    """A custom-container job (no package) whose --config adds `extra` to a CUSTOM trainingInput."""
    def build(tmp: Path, pkg: Path) -> list[str]:
        path = tmp / "config.yaml"
        path.write_text(yaml.safe_dump({"trainingInput": {
            "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerType": "n1-standard-4", "workerCount": 1,
            "masterConfig": {"imageUri": "gcr.io/p/i"}, **extra}}))
        return ["jobs", "submit", "training", "img_job", "--region", "us-central1", "--config", str(path)]

    return build


def command(*argv: str) -> Argv:
    return lambda tmp, pkg: list(argv)


BOMB = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{previous}'] * 10)}]\n"
    for previous, name in zip("abcdefg", "bcdefgh", strict=True))

# (case id, argv, environment, expected exit code, text stderr must contain)
INVOCATIONS: list[tuple[str, Argv, dict[str, str], int, str]] = [
    ("job-id-trailing-newline", submit(job="my_job\n"), {}, 2, "jobId"),
    ("job-id-inner-newline", submit(job="my\njob"), {}, 2, "jobId"),
    ("job-id-trailing-cr", submit(job="my_job\r"), {}, 2, "jobId"),
    ("job-id-nul", submit(job="my\0job"), {}, 2, "jobId"),
    ("job-id-non-ascii", submit(job="jöb"), {}, 2, "jobId"),
    ("job-id-fullwidth-digit", submit(job="job\uff11"), {}, 2, "jobId"),
    ("job-id-129-chars", submit(job="j" * 129), {}, 2, "jobId"),
    ("job-id-empty", submit(job=""), {}, 2, "jobId"),
    *[(f"tuning-{bound}-{word}", with_config(tuning(**{bound: value})), {}, 2, bound)
      for bound in ("minValue", "maxValue") for word, value in (("nan", math.nan), ("inf", math.inf),
                                                                  ("minus-inf", -math.inf))],
    ("tuning-discrete-nan", with_config(tuning(type="DISCRETE", minValue=None, maxValue=None,
                                               discreteValues=[1.0, math.nan])), {}, 2, "discreteValues"),
    ("tuning-yaml-dot-nan", with_config("trainingInput:\n  hyperparameters:\n    goal: MAXIMIZE\n    params:\n"
                                        "    - {parameterName: lr, type: DOUBLE, minValue: .NaN, maxValue: 1}\n"),
     {}, 2, "minValue"),
    ("worker-count-nan", with_config({"trainingInput": {"scaleTier": "CUSTOM", "masterType": "n1-standard-4",
                                                        "workerType": "n1-standard-4", "workerCount": math.nan}}),
     {}, 2, "workerCount"),
    ("config-nested-10000", with_config("trainingInput:\n  args: " + "[" * 10000 + "]" * 10000 + "\n"),
     {}, 2, "--config"),
    ("config-nested-200", with_config("trainingInput: " + "{a: " * 200 + "1" + "}" * 200 + "\n"), {}, 2, "--config"),
    ("config-yaml-bomb", with_config(BOMB), {}, 2, "--config"),
    ("config-not-utf8", with_config(b"trainingInput:\n  region: \xff\xfe\n"), {}, 2, "--config"),
    ("config-utf16", with_config("trainingInput: {}\n".encode("utf-16")), {}, 2, "--config"),
    ("config-dev-zero", lambda tmp, pkg: submit("--config", "/dev/zero")(tmp, pkg), {}, 2, "--config"),
    ("config-directory", lambda tmp, pkg: submit("--config", str(tmp))(tmp, pkg), {}, 2, "--config"),
    ("config-too-large", with_config("# padding\n" * 200_000), {}, 2, "--config"),
    ("config-a-list", with_config("[]\n"), {}, 2, "--config"),
    ("config-a-number", with_config("42\n"), {}, 2, "--config"),
    ("config-binary", with_config(bytes(range(256))), {}, 2, "--config"),
    ("config-duplicate-key", with_config("trainingInput:\n  scaleTier: BASIC\n  scaleTier: CUSTOM\n"), {}, 2,
     "'scaleTier' is given twice (lines 2 and 3)"),
    ("config-duplicate-top-level", with_config("trainingInput: {}\nlabels: {a: b}\ntrainingInput:\n  args: [x]\n"),
     {}, 2, "'trainingInput' is given twice (lines 1 and 3)"),
    ("config-duplicate-flow-key", with_config("labels: {team: a, team: b}\n"), {}, 2, "'team' is given twice"),
    ("config-duplicate-json-key", with_config('{"trainingInput": {"workerCount": 2, "workerCount": 40}}\n'), {}, 2,
     "'workerCount' is given twice"),
    ("job-dir-dot-dot", submit("--job-dir", "gs://my-bucket/../etc"), {}, 2, "jobDir"),
    ("job-dir-dot", submit("--job-dir", "gs://my-bucket/./out"), {}, 2, "jobDir"),
    ("job-dir-empty-segment", submit("--job-dir", "gs://my-bucket/a//b"), {}, 2, "jobDir"),
    ("job-dir-newline", submit("--job-dir", "gs://my-bucket/out\n"), {}, 2, "jobDir"),
    ("job-dir-bucket-dot-dot", submit("--job-dir", "gs://../etc"), {}, 2, "jobDir"),
    ("job-dir-over-1024-bytes", submit("--job-dir", "gs://my-bucket/" + "d/" * 520), {}, 2,
     "the object name has 1040 bytes; Cloud Storage allows at most 1024"),
    ("job-dir-300-byte-segment", submit("--job-dir", "gs://my-bucket/" + "s" * 300 + "/out"), {}, 2,
     "a file name has at most 255 bytes (a segment of this name has 300)"),
    ("arg-300-byte-segment", submit("--", "--data=gs://my-bucket/" + "s" * 300), {}, 2, "trainingInput.args[0]"),
    ("staging-bucket-newline", submit("--staging-bucket", "gs://my-bucket\n"), {}, 2, "--staging-bucket"),
    ("packages-bucket-dot-dot", submit("--packages", "gs://../x.tar.gz"), {}, 2, "--packages"),
    ("packages-object-dot-dot", submit("--packages", "gs://my-bucket/a/../x.tar.gz"), {}, 2, "--packages"),
    ("packages-not-an-archive", with_file("extra-1.0.tar.gz", b"just text", "--packages"), {}, 2, "--packages"),
    ("packages-empty-file", with_file("extra-1.0.whl", b"", "--packages"), {}, 2, "--packages"),
    ("packages-a-python-file", with_file("extra.py", b"print(1)\n", "--packages"), {}, 2, "--packages"),
    ("arg-200-kib", submit("--", "x" * 200 * 1024), {}, 2, "trainingInput.args[0]"),
    ("args-total-600-kib", submit("--", *["y" * 100 * 1024] * 6), {}, 2, "trainingInput.args"),
    ("arg-with-nul", submit("--", "a\0b"), {}, 2, "trainingInput.args[0]"),
    ("timeout-nan", submit("--stream-logs", "--timeout", "nan"), {}, 2, "--timeout"),
    ("timeout-inf", submit("--stream-logs", "--timeout", "inf"), {}, 2, "--timeout"),
    ("timeout-negative", submit("--stream-logs", "--timeout", "-5"), {}, 2, "--timeout"),
    ("wait-timeout-nan", command("jobs", "wait", "some_job", "--timeout", "nan"), {}, 2, "--timeout"),
    ("stream-logs-interval-inf", command("jobs", "stream-logs", "some_job", "--polling-interval", "inf"), {}, 2,
     "--polling-interval"),
    ("stream-logs-interval-nan", command("jobs", "stream-logs", "some_job", "--polling-interval", "nan"), {}, 2,
     "--polling-interval"),
    ("project-uppercase", submit("--project", "My-Project"), {}, 2, "--project"),
    ("project-underscore", submit("--project", "my_project"), {}, 2, "--project"),
    ("project-too-short", submit("--project", "ci"), {}, 2, "--project"),
    ("project-too-long", submit("--project", "p" * 31), {}, 2, "--project"),
    ("project-trailing-hyphen", submit("--project", "my-project-"), {}, 2, "--project"),
    ("project-trailing-newline", submit("--project", "my-project\n"), {}, 2, "--project"),
    ("project-digit-first", command("jobs", "list", "--project", "1-my-project"), {}, 2, "--project"),
    ("project-env-path", command("jobs", "list"), {"AIPTRAIN_PROJECT": "../etc"}, 2, "--project"),
    *[(f"setting-{name.lower()}-{raw}", submit(), {name: raw}, 2, name)
      for name in ("AIPTRAIN_LOCAL_KILL_GRACE", "AIPTRAIN_LOCAL_RESTART_DELAY", "AIPTRAIN_LOCAL_EVALUATOR_GRACE")
      for raw in ("nan", "inf", "1e999")],
    ("setting-cache-age-inf", submit(), {"AIPTRAIN_CACHE_MAX_AGE_DAYS": "inf"}, 2, "AIPTRAIN_CACHE_MAX_AGE_DAYS"),
    ("setting-max-running-text", submit(), {"AIPTRAIN_LOCAL_MAX_RUNNING": "lots"}, 2, "AIPTRAIN_LOCAL_MAX_RUNNING"),
    ("list-filter-nested", command("jobs", "list", "--filter", "(" * 500 + "state=FAILED" + ")" * 500), {}, 2,
     "filter"),
    ("serve-token-file-missing", lambda tmp, pkg: ["local", "serve", "--token-file", str(tmp / "absent")], {}, 2,
     "--token-file"),
    ("serve-token-file-empty", lambda tmp, pkg: ["local", "serve", "--token-file", str(_empty(tmp))], {}, 2,
     "--token-file"),
    ("serve-token-and-token-file", lambda tmp, pkg: ["local", "serve", "--token", "t", "--token-file",
                                                     str(_empty(tmp))], {}, 2, "--token-file"),
    ("serve-remote-without-token", command("local", "serve", "--host", "0.0.0.0"), {}, 2, "loopback"),
    # An image URI that is no image reference would reach the engine's command line as an option.
    ("image-uri-an-option", command("jobs", "submit", "training", "img_job", "--region", "us-central1",
                                    "--master-image-uri=--help"), {}, 2,
     "masterConfig.imageUri: '--help' is not an image reference"),
    ("image-uri-with-space", command("jobs", "submit", "training", "img_job", "--region", "us-central1",
                                     "--master-image-uri", "gcr.io/p/My Image"), {}, 2,
     "masterConfig.imageUri: 'gcr.io/p/My Image' is not an image reference"),
    ("worker-image-uri-an-option", container_config({"workerConfig": {"imageUri": "-v"}}), {}, 2,
     "workerConfig.imageUri: '-v' is not an image reference"),
]


def _empty(tmp: Path) -> Path:
    path = tmp / "token"
    path.write_text("\n")
    return path


def test_the_table_is_large_and_its_ids_unique() -> None:
    assert len(INVOCATIONS) >= 60
    assert len({case[0] for case in INVOCATIONS}) == len(INVOCATIONS)


@pytest.mark.parametrize(("argv", "env", "exit_code", "field"), [case[1:] for case in INVOCATIONS],
                         ids=[case[0] for case in INVOCATIONS])
def test_hostile_invocation_is_refused_cleanly(tmp_path: Path, isolated_environment: Path, argv: Argv,
                                               env: dict[str, str], exit_code: int, field: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    package = make_trainer(tmp_path)
    result = CliRunner().invoke(root, argv(tmp_path, package), catch_exceptions=False)
    assert result.exit_code == exit_code, result.output
    assert field in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert "internal error" not in result.stderr
    assert stored_objects(isolated_environment) == []
    assert created_jobs(isolated_environment) == 0
