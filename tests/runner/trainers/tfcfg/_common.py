"""Helpers shared by the test trainers: where to write, and which replica this is."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

_PREFIXES = {"master": "master", "chief": "master", "worker": "worker", "ps": "ps", "evaluator": "evaluator"}


def flag(name: str, default: str | None = None) -> str | None:
    """The value of `--name VALUE` or `--name=VALUE` in sys.argv (the last one wins)."""
    value = default
    args = sys.argv[1:]
    for index, arg in enumerate(args):
        if arg == f"--{name}" and index + 1 < len(args):
            value = args[index + 1]
        elif arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
    return value


def local_path(value: str) -> Path:
    """A path for plain file I/O. These trainers steer the tests through files, and a gs://
    --job-dir (handed over unchanged, as on the service) is read here where the local store
    keeps it, $AIPTRAIN_HOME/storage; a real trainer would use tf.io.gfile or a GCS client."""
    if value.startswith("gs://"):
        return Path(os.environ["AIPTRAIN_HOME"]) / "storage" / value.removeprefix("gs://")
    return Path(value)


def job_dir() -> Path:
    value = flag("job-dir")
    if value is None:
        raise SystemExit("no --job-dir given")
    path = local_path(value)
    path.mkdir(parents=True, exist_ok=True)
    return path


def tf_config() -> dict[str, Any]:
    return json.loads(os.environ.get("TF_CONFIG") or "{}")


def task_name() -> str:
    task = tf_config().get("task") or {}
    kind = task.get("type", "master")
    return f"{_PREFIXES[kind]}-replica-{task.get('index', 0)}"


def is_primary() -> bool:
    return task_name() == "master-replica-0"


def write_json(path: Path, data: Any) -> None:
    """Write atomically, so a reader polling for the file never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data))
    temporary.replace(path)


def wait_for(condition: Any, timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def primary_waits_for_reports(directory: Path) -> None:
    """The primary waits until `--expect N` replicas wrote their report into `directory`, so none
    is stopped before it did."""
    if not is_primary():
        return
    expected = int(flag("expect", "1") or "1")
    if not wait_for(lambda: len(list(directory.glob("*.json"))) >= expected):
        raise SystemExit(f"only {len(list(directory.glob('*.json')))} of {expected} replicas reported")
