"""Bad command lines and configs: exit 2, a message naming the field, nothing staged or created.

Each case runs the real `aiptrain jobs submit training` command. After it, the local store holds
no object and no job, whatever the case got wrong.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from aiptrain._cli.main import root

GOOD = ["--package-path", "{pkg}", "--module-name", "trainer.task", "--region", "us-central1"]


def make_trainer(root_dir: Path) -> Path:
    package = root_dir / "project" / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text("print('hello')\n")
    return package


def config(tmp: Path, data: Any, name: str = "config.yaml") -> str:
    path = tmp / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(path)


def hp(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"goal": "MAXIMIZE", "maxTrials": 4, "maxParallelTrials": 2,
                            "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.01, "maxValue": 0.1}]}
    base.update(spec)
    return {"trainingInput": {"hyperparameters": base}}


# (case id, job id, extra args (or a function of tmp returning them), text that must name the field)
CASES: list[tuple[str, str, Any, str]] = [
    ("dash-in-id", "my-job-1", [], "jobId"),
    ("digit-first-id", "1job", [], "jobId"),
    ("id-too-long", "j" * 129, [], "jobId"),
    ("id-with-space", "my job", [], "jobId"),
    ("staging-not-gs", "ok", ["--staging-bucket", "my-bucket"], "--staging-bucket"),
    ("staging-short", "ok", ["--staging-bucket", "gs://ab"], "--staging-bucket"),
    ("staging-uppercase", "ok", ["--staging-bucket", "gs://Bad_Bucket"], "--staging-bucket"),
    ("staging-with-path", "ok", ["--staging-bucket", "gs://my-bucket/sub/dir"], "--staging-bucket"),
    ("staging-google", "ok", ["--staging-bucket", "gs://my-google-bucket"], "--staging-bucket"),
    ("job-dir-goog-prefix", "ok", ["--job-dir", "gs://goog-bucket/x"], "trainingInput.jobDir"),
    ("job-dir-local", "ok", ["--job-dir", "/tmp/out"], "trainingInput.jobDir"),
    ("job-dir-bad-bucket", "ok", ["--job-dir", "gs://x/out"], "trainingInput.jobDir"),
    ("no-region", "ok", lambda tmp, pkg: ["--package-path", str(pkg), "--module-name", "trainer.task"],
     "trainingInput.region"),
    ("unknown-region", "ok", ["--region", "mars-north1"], "trainingInput.region"),
    ("scale-tier-choice", "ok", ["--scale-tier", "huge"], "--scale-tier"),
    ("custom-without-master", "ok", ["--scale-tier", "custom"], "trainingInput.masterType"),
    ("worker-count-without-type", "ok", ["--worker-count", "2"], "--worker-machine-type"),
    ("ps-type-without-count", "ok", ["--parameter-server-machine-type", "n1-standard-4"],
     "--parameter-server-count"),
    ("worker-count-zero", "ok", ["--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
                                 "--worker-machine-type", "n1-standard-4", "--worker-count", "0"], "--worker-count"),
    ("basic-with-machine", "ok", ["--scale-tier", "basic", "--master-machine-type", "n1-standard-4"],
     "trainingInput.masterType"),
    ("unknown-machine", "ok", ["--scale-tier", "custom", "--master-machine-type", "n1-standrd-4"],
     "trainingInput.masterType"),
    ("mixed-families", "ok", ["--scale-tier", "custom", "--master-machine-type", "standard",
                              "--worker-machine-type", "n1-standard-4", "--worker-count", "1"], "legacy"),
    ("unknown-accelerator", "ok", ["--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
                                   "--master-accelerator", "type=nvidia-tesla-x,count=1"], "--master-accelerator"),
    ("accelerator-no-count", "ok", ["--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
                                    "--master-accelerator", "type=nvidia-tesla-t4"], "--master-accelerator"),
    ("accelerator-zero", "ok", ["--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
                                "--master-accelerator", "type=nvidia-tesla-t4,count=0"], "--master-accelerator"),
    ("accelerator-on-basic", "ok", ["--scale-tier", "basic", "--master-accelerator", "type=nvidia-tesla-t4,count=1"],
     "scale tier BASIC takes no accelerators (--master-accelerator)"),
    ("accelerator-without-tier", "ok", ["--worker-accelerator", "type=nvidia-tesla-t4,count=1"],
     "use --scale-tier custom with --worker-machine-type"),
    ("accelerator-on-standard-1", "ok", ["--scale-tier", "standard-1", "--parameter-server-accelerator",
                                         "type=nvidia-tesla-t4,count=1"],
     "trainingInput.parameterServerConfig.acceleratorConfig: scale tier STANDARD_1 takes no accelerators"),
    ("accelerator-on-legacy", "ok", ["--scale-tier", "custom", "--master-machine-type", "standard",
                                     "--master-accelerator", "type=nvidia-tesla-t4,count=1"],
     "masterConfig.acceleratorConfig"),
    ("accelerator-not-in-region", "ok", ["--region", "europe-west3", "--scale-tier", "custom",
                                         "--master-machine-type", "n1-standard-4",
                                         "--master-accelerator", "type=nvidia-tesla-t4,count=1"],
     "masterConfig.acceleratorConfig"),
    ("accelerator-count-not-offered", "ok", ["--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
                                             "--master-accelerator", "type=nvidia-tesla-t4,count=3"],
     "acceleratorConfig.count"),
    ("gpu-tier-not-in-region", "ok", ["--scale-tier", "basic-gpu", "--region", "europe-west3"],
     "trainingInput.scaleTier"),
    ("unknown-runtime", "ok", ["--runtime-version", "9.9"], "trainingInput.runtimeVersion"),
    ("python-not-in-runtime", "ok", ["--runtime-version", "2.11", "--python-version", "2.7"],
     "trainingInput.pythonVersion"),
    ("runtime-and-image", "ok", ["--runtime-version", "2.11", "--master-image-uri", "gcr.io/p/img"],
     "--runtime-version"),
    # No container engine answers in the suite's environment (tests/conftest.py).
    ("image-without-engine", "ok", ["--master-image-uri", "gcr.io/p/img:1"], "Docker (/"),
    ("chief-flag-word", "ok", ["--use-chief-in-tf-config", "maybe"], "--use-chief-in-tf-config"),
    ("label-uppercase", "ok", ["--labels", "Team=ml"], "labels.Team"),
    ("label-no-value", "ok", ["--labels", "team"], "--labels"),
    ("service-account", "ok", ["--service-account", "nobody"], "trainingInput.serviceAccount"),
    ("kms-short-key", "ok", ["--kms-key", "mykey"], "--kms-key"),
    ("no-module", "ok", lambda tmp, pkg: ["--package-path", str(pkg), "--region", "us-central1"],
     "trainingInput.pythonModule"),
    ("package-path-missing", "ok", lambda tmp, pkg: ["--package-path", str(tmp / "nope"),
                                                     "--module-name", "trainer.task", "--region", "us-central1"],
     "nope"),
    ("package-without-init", "ok", lambda tmp, pkg: _no_init(tmp), "__init__.py"),
    ("no-package-at-all", "ok", lambda tmp, pkg: ["--module-name", "trainer.task", "--region", "us-central1"],
     "--package-path"),
    ("packages-missing-file", "ok", ["--packages", "dist/missing-1.0.tar.gz"], "--packages"),
    ("packages-duplicate-names", "ok", lambda tmp, pkg: [*_good(pkg), "--packages", _duplicates(tmp)],
     "x-1.0.tar.gz"),
    ("packages-same-name-as-built", "ok", lambda tmp, pkg: _same_name_as_built(tmp),
     "same file name as the package built"),
    ("config-unknown-field", "ok", lambda tmp, pkg: [*_good(pkg), "--config",
                                                     config(tmp, {"trainingInput": {"scaleTeir": "BASIC"}})],
     "scaleTier"),
    ("config-bad-enum", "ok", lambda tmp, pkg: [*_good(pkg), "--config",
                                                config(tmp, {"trainingInput": {"scaleTier": "basik"}})],
     "trainingInput.scaleTier"),
    ("config-not-mapping", "ok", lambda tmp, pkg: [*_good(pkg), "--config", config(tmp, "- a\n- b\n")], "--config"),
    ("config-bad-yaml", "ok", lambda tmp, pkg: [*_good(pkg), "--config", config(tmp, "a: [1, 2\n")], "line"),
    ("config-missing", "ok", lambda tmp, pkg: [*_good(pkg), "--config", str(tmp / "absent.yaml")], "--config"),
    ("config-custom-without-master", "ok", lambda tmp, pkg: [*_good(pkg), "--config",
                                                             config(tmp, {"trainingInput": {"scaleTier": "CUSTOM"}})],
     "trainingInput.masterType"),
    ("config-worker-count-string", "ok", lambda tmp, pkg: [*_good(pkg), "--config",
                                                           config(tmp, {"trainingInput": {"workerCount": "two"}})],
     "trainingInput.workerCount"),
    ("hp-parallel-over-max", "ok", lambda tmp, pkg: [*_good(pkg), "--config", config(tmp, hp(maxParallelTrials=9))],
     "maxParallelTrials"),
    ("hp-grid-double", "ok", lambda tmp, pkg: [*_good(pkg), "--config", config(tmp, hp(algorithm="GRID_SEARCH"))],
     "params[0].type"),
    ("hp-discrete-order", "ok", lambda tmp, pkg: [*_good(pkg), "--config", config(tmp, hp(params=[
        {"parameterName": "d", "type": "DISCRETE", "discreteValues": [1, 3, 2]}]))], "discreteValues"),
    ("hp-duplicate-names", "ok", lambda tmp, pkg: [*_good(pkg), "--config", config(tmp, hp(params=[
        {"parameterName": "a", "type": "INTEGER", "minValue": 1, "maxValue": 3},
        {"parameterName": "a", "type": "INTEGER", "minValue": 1, "maxValue": 3}]))], "params[1].parameterName"),
    ("hp-log-scale-zero", "ok", lambda tmp, pkg: [*_good(pkg), "--config", config(tmp, hp(params=[
        {"parameterName": "lr", "type": "DOUBLE", "minValue": 0, "maxValue": 1,
         "scaleType": "UNIT_LOG_SCALE"}]))], "params[0].minValue"),
    ("hp-no-params", "ok", lambda tmp, pkg: [*_good(pkg), "--config", config(tmp, hp(params=[]))],
     "hyperparameters.params"),
    ("scheduling-wait", "ok", lambda tmp, pkg: [*_good(pkg), "--config", config(
        tmp, {"trainingInput": {"scheduling": {"maxWaitTime": "60s"}}})], "maxWaitTime"),
    ("too-many-packages", "ok", lambda tmp, pkg: [*_good(pkg), "--config", config(
        tmp, {"trainingInput": {"packageUris": [f"gs://my-bucket/p{i}.tar.gz" for i in range(100)]}})],
     "packageUris"),
    ("worker-count-negative", "ok", ["--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
                                     "--worker-machine-type", "n1-standard-4", "--worker-count", "-1"],
     "--worker-count"),
    ("unknown-machine-far", "ok", ["--scale-tier", "custom", "--master-machine-type", "bogus"],
     "trainingInput.masterType"),
    ("scheduling-priority", "ok", lambda tmp, pkg: [*_good(pkg), "--config", config(
        tmp, {"trainingInput": {"scheduling": {"priority": 5000}}})], "scheduling.priority"),
    ("hp-min-above-max", "ok", lambda tmp, pkg: [*_good(pkg), "--config", config(tmp, hp(params=[
        {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.1, "maxValue": 0.01}]))], "params[0].minValue"),
    ("hp-integer-fractional", "ok", lambda tmp, pkg: [*_good(pkg), "--config", config(tmp, hp(params=[
        {"parameterName": "n", "type": "INTEGER", "minValue": 1.5, "maxValue": 4}]))], "params[0]"),
    ("container-args-with-args", "ok", lambda tmp, pkg: [*_good(pkg), "--config", config(
        tmp, {"trainingInput": {"args": ["--a"], "masterConfig": {"containerArgs": ["--b"]}}})], "masterConfig"),
]


def _good(pkg: Path) -> list[str]:
    return [arg.format(pkg=pkg) for arg in GOOD]


def _no_init(tmp: Path) -> list[str]:
    bare = tmp / "bare" / "trainer"
    bare.mkdir(parents=True)
    (bare / "task.py").write_text("")
    return ["--package-path", str(bare), "--module-name", "trainer.task", "--region", "us-central1"]


def _duplicates(tmp: Path) -> str:
    first, second = tmp / "a" / "x-1.0.tar.gz", tmp / "b" / "x-1.0.tar.gz"
    for path in (first, second):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"not really a tarball")
    return f"{first},{second}"


def _same_name_as_built(tmp: Path) -> list[str]:
    """A project whose sdist is trainer-1.0.tar.gz, and an unrelated archive of that name."""
    project = tmp / "named"
    (project / "trainer").mkdir(parents=True)
    (project / "trainer" / "__init__.py").write_text("")
    (project / "setup.py").write_text("from setuptools import setup\nsetup(name='trainer', version='1.0', "
                                      "packages=['trainer'])\n")
    other = tmp / "dist" / "trainer-1.0.tar.gz"
    other.parent.mkdir()
    with tarfile.open(other, "w:gz") as archive:  # an older build: a real archive, as --packages needs
        archive.add(project / "setup.py", arcname="trainer-1.0/setup.py")
    return ["--package-path", str(project / "trainer"), "--module-name", "trainer.task",
            "--region", "us-central1", "--packages", str(other)]


def stored_objects(home: Path) -> list[Path]:
    storage = home / "storage"
    return [p for p in storage.rglob("*") if p.is_file()] if storage.exists() else []


def created_jobs(home: Path) -> int:
    database = home / "jobs.db"
    if not database.exists():
        return 0
    import sqlite3

    with sqlite3.connect(database) as connection:
        tables = {row[0] for row in connection.execute("select name from sqlite_master where type='table'")}
        return connection.execute("select count(*) from jobs").fetchone()[0] if "jobs" in tables else 0


def test_table_has_at_least_forty_cases() -> None:
    assert len(CASES) >= 40
    assert len({case[0] for case in CASES}) == len(CASES)


@pytest.mark.parametrize(("job_id", "extra", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_invocation_exits_2_naming_the_field(
    tmp_path: Path, isolated_environment: Path, job_id: str, extra: Any, field: str
) -> None:
    package = make_trainer(tmp_path)
    args = extra(tmp_path, package) if callable(extra) else [*_good(package), *extra]
    before = sorted(p.name for p in package.parent.iterdir())
    result = CliRunner().invoke(root, ["jobs", "submit", "training", job_id, *args], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert field in result.stderr, result.stderr
    assert result.stdout == ""
    assert stored_objects(isolated_environment) == []
    assert created_jobs(isolated_environment) == 0
    assert sorted(p.name for p in package.parent.iterdir()) == before  # the user's tree is untouched


@pytest.mark.parametrize(("job_id", "extra"), [c[1:3] for c in CASES], ids=[c[0] for c in CASES])
def test_every_problem_comes_with_a_fix(tmp_path: Path, job_id: str, extra: Any) -> None:
    """Each listed problem is followed by a non-empty `hint:` line saying what to do instead."""
    package = make_trainer(tmp_path)
    args = extra(tmp_path, package) if callable(extra) else [*_good(package), *extra]
    result = CliRunner().invoke(root, ["jobs", "submit", "training", job_id, *args], catch_exceptions=False)
    assert result.exit_code == 2
    blocks = result.stderr.split("\n  - ")[1:]  # one per problem; a lone error has none
    if not blocks:
        assert "\nhint: " in result.stderr, result.stderr
    for block in blocks:
        hints = [line for line in block.splitlines() if line.startswith("    hint: ")]
        assert hints and hints[0].removeprefix("    hint: ").strip(), f"no hint for: {block}"


def test_all_problems_are_reported_together(tmp_path: Path) -> None:
    package = make_trainer(tmp_path)
    result = CliRunner().invoke(root, [
        "jobs", "submit", "training", "my-job", "--package-path", str(package), "--module-name", "trainer.task",
        "--region", "mars", "--scale-tier", "custom", "--labels", "Bad=1", "--staging-bucket", "gs://A",
    ], catch_exceptions=False)
    assert result.exit_code == 2
    for field in ("jobId", "trainingInput.region", "trainingInput.masterType", "labels.Bad", "--staging-bucket"):
        assert field in result.stderr
    assert "use my_job" in result.stderr


def test_unknown_config_field_does_not_hide_other_problems(tmp_path: Path, isolated_environment: Path) -> None:
    package = make_trainer(tmp_path)
    path = config(tmp_path, {"labels": {"Owner": "x"},
                             "trainingInput": {"scaleTeir": "BASIC", "region": "mars", "masterType": "bogus"}})
    result = CliRunner().invoke(root, [
        "jobs", "submit", "training", "my-job", "--package-path", str(package), "--module-name", "trainer.task",
        "--config", path, "--job-dir", "gs://A/x", "--runtime-version", "9",
    ], catch_exceptions=False)
    assert result.exit_code == 2
    for field in ("trainingInput.scaleTeir", "jobId", "labels.Owner", "trainingInput.region",
                  "trainingInput.masterType", "trainingInput.jobDir", "trainingInput.runtimeVersion"):
        assert field in result.stderr, field
    assert stored_objects(isolated_environment) == []


@pytest.mark.parametrize(("extra", "field"), [
    (["--region", "us-central1"], "trainingInput.pythonModule"),
    (["--module-name", "trainer.task", "--region", "us-central1", "--scale-tier", "custom",
      "--master-machine-type", "n1-standard-4", "--worker-count", "2"], "--worker-machine-type"),
], ids=["no-module", "worker-count-without-type"])
def test_a_problem_is_reported_once(tmp_path: Path, extra: list[str], field: str) -> None:
    package = make_trainer(tmp_path)
    result = CliRunner().invoke(root, ["jobs", "submit", "training", "ok", "--package-path", str(package),
                                       *extra], catch_exceptions=False)
    assert result.exit_code == 2
    listed = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert len(listed) == 1, result.stderr
    assert listed[0].startswith(f"  - {field}: ")


def test_async_and_stream_logs_conflict(tmp_path: Path) -> None:
    package = make_trainer(tmp_path)
    result = CliRunner().invoke(root, ["jobs", "submit", "training", "ok", *_good(package), "--async",
                                       "--stream-logs"], catch_exceptions=False)
    assert result.exit_code == 2
    assert "--async" in result.stderr
