"""`aiptrain local train`: the foreground run, as `gcloud ai-platform local train` did it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# With --job-dir, every other replica leaves a marker there once it has printed, and the chief waits
# for all of them: otherwise the chief can exit, and the run end, before a worker has started.
TRAINER = """
import glob, json, os, sys, time
config = json.loads(os.environ["TF_CONFIG"])
task = config["task"]
print("task", task.get("type"), task.get("index"), "args", json.dumps(sys.argv[1:]), flush=True)
job_dir = sys.argv[sys.argv.index("--job-dir") + 1] if "--job-dir" in sys.argv else None
if task.get("type") in ("chief", "master"):
    peers = sum(len(config["cluster"].get(kind, [])) for kind in ("worker", "ps"))
    deadline = time.monotonic() + 60
    while job_dir and len(glob.glob(os.path.join(job_dir, "*.ready"))) < peers and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(int(os.environ.get("PRIMARY_EXIT", "0")))
if job_dir:
    os.makedirs(job_dir, exist_ok=True)
    open(os.path.join(job_dir, "%s-%s.ready" % (task["type"], task["index"])), "w").close()
time.sleep(60)
"""


def make_trainer(root: Path) -> Path:
    package = root / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text(TRAINER)
    return package


def local_train(package: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "aiptrain", "local", "train", "--package-path", str(package),
                           "--module-name", "trainer.task", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_distributed_run_prefixes_every_line_with_its_task(tmp_path: Path) -> None:
    package = make_trainer(tmp_path)
    result = local_train(package, "--distributed", "--worker-count", "1", "--parameter-server-count", "1",
                         "--job-dir", str(tmp_path / "out"), "--", "--lr", "0.1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    chief = [line for line in lines if line.startswith("[master-replica-0] task chief 0")]
    assert len(chief) == 1
    assert json.loads(chief[0].split(" args ", 1)[1]) == ["--lr", "0.1", "--job-dir", str(tmp_path / "out")]
    assert any(line.startswith("[worker-replica-0] task worker 0") for line in lines)
    assert any(line.startswith("[ps-replica-0] task ps 0") for line in lines)


def test_exit_code_is_the_primarys(tmp_path: Path) -> None:
    package = make_trainer(tmp_path)
    result = local_train(package, "--distributed", "--worker-count", "1", "--parameter-server-count", "0",
                         env={"PRIMARY_EXIT": "3"})
    assert result.returncode == 3


def test_module_name_is_required(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "aiptrain", "local", "train", "--package-path",
                             str(make_trainer(tmp_path))], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "--module-name" in result.stderr
