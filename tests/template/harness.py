"""Launching trainer replicas as real processes with hand-built TF_CONFIG, and reading what they wrote."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_DIR = REPO_ROOT / "trainer_template"

# Small enough for two CPU cores to run a whole cluster in seconds, big enough to learn digits.
TINY_HYPERPARAMETERS = (
    "--batch-size", "32",
    "--learning-rate", "0.01",
    "--hidden-units", "32",
    "--throttle-secs", "0",
)


def free_ports(count: int) -> list[int]:
    """Ports the kernel just handed out; all sockets stay open until every port is chosen."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


def loopback_cluster(**sizes: int) -> dict[str, list[str]]:
    """``loopback_cluster(chief=1, worker=2)`` -> addresses on free loopback ports."""
    ports = iter(free_ports(sum(sizes.values())))
    return {name: [f"localhost:{next(ports)}" for _ in range(count)] for name, count in sizes.items() if count}


def tf_config(cluster: Mapping[str, list[str]], task_type: str, index: int, **extra: Any) -> str:
    return json.dumps({"cluster": dict(cluster), "task": {"type": task_type, "index": index}, **extra})


def trainer_environment(**overrides: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"TF_CONFIG", "AIP_MODEL_DIR", "CLOUD_ML_HP_METRIC_FILE", "PYTHONPATH"}
    }
    env.update(
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
        TF_NUM_INTRAOP_THREADS="1",
    )
    env.update(overrides)
    return env


@dataclass
class Replica:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])


@dataclass
class Launcher:
    """Starts replicas and guarantees they are all killed when the test ends."""

    log_dir: Path
    replicas: list[Replica] = field(default_factory=list)

    def start(
        self,
        name: str,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path = TEMPLATE_DIR,
    ) -> Replica:
        log_path = self.log_dir / f"{name}.log"
        with log_path.open("wb") as log_file:
            process = subprocess.Popen(
                [sys.executable, "-m", "trainer.task", *args],
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        replica = Replica(name, process, log_path)
        self.replicas.append(replica)
        return replica

    def wait(self, replica: Replica, timeout: float) -> int:
        try:
            return replica.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{replica.name} still running after {timeout}s:\n{self.dump()}") from None

    def kill_all(self) -> None:
        for replica in self.replicas:
            if replica.process.poll() is None:
                replica.process.kill()
        for replica in self.replicas:
            try:
                replica.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass

    def dump(self) -> str:
        return "\n".join(f"----- {replica.name} -----\n{replica.tail()}" for replica in self.replicas)


def wait_for(condition: Any, timeout: float, what: str, poll: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def send_signal(replica: Replica, signum: signal.Signals) -> None:
    replica.process.send_signal(signum)


# -- what replicas log -------------------------------------------------------------------------

STEP_LINE = re.compile(r"\] step (\d+)/(\d+) loss=")


def logged_steps(log: str) -> list[int]:
    return [int(match.group(1)) for match in STEP_LINE.finditer(log)]


def logged_value(log: str, pattern: str) -> str:
    match = re.search(pattern, log)
    assert match, f"no line matching {pattern!r} in:\n{log[-3000:]}"
    return match.group(1)


def first_batch_fingerprint(log: str) -> str:
    return logged_value(log, r"first batch fingerprint ([0-9a-f]+)")


def first_epoch_files(log: str) -> list[str]:
    return logged_value(log, r"first epoch order: (.+)").strip().split(", ")


# -- what replicas write -----------------------------------------------------------------------


def checkpoint_steps(job_dir: Path) -> list[int]:
    indexes = (job_dir / "checkpoints").glob("ckpt-*.index")
    return sorted(int(path.name[len("ckpt-") : -len(".index")]) for path in indexes)


def latest_checkpoint_step(job_dir: Path) -> int | None:
    state = job_dir / "checkpoints" / "checkpoint"
    if not state.exists():
        return None
    match = re.search(r'^model_checkpoint_path: "ckpt-(\d+)"', state.read_text(), re.M)
    return int(match.group(1)) if match else None


def summary_tags(log_dir: Path) -> dict[str, list[int]]:
    """Scalar tag -> steps it was written at, from every event file in ``log_dir``."""
    import tensorflow as tf

    tags: dict[str, list[int]] = {}
    for path in sorted(log_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                tags.setdefault(value.tag, []).append(event.step)
    return tags


def read_digits(files: Iterable[Path]) -> tuple[Any, Any]:
    import numpy as np

    rows = [np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2) for path in sorted(files)]
    data = np.concatenate(rows)
    return data[:, :64].astype("float32"), data[:, 64].astype("int64")


def export_accuracy(export_dir: Path, eval_files: Iterable[Path]) -> float:
    """Accuracy of the exported SavedModel's serving signature on held-out digits."""
    import tensorflow as tf

    features, labels = read_digits(eval_files)
    loaded = tf.saved_model.load(str(export_dir))
    outputs = loaded.signatures["serving_default"](features=tf.constant(features))
    classes = outputs["classes"].numpy()
    assert outputs["probabilities"].shape == (len(labels), 10)
    return float((classes == labels).mean())


def single_export(job_dir: Path) -> Path:
    exports = sorted(path for path in (job_dir / "export").iterdir() if path.name.isdigit())
    assert len(exports) == 1, f"expected one export, found {exports}"
    assert (exports[0] / "saved_model.pb").exists()
    return exports[0]


def assert_trained_job(job_dir: Path, final_step: int, eval_files: Iterable[Path]) -> float:
    """The job reached its step target, checkpointed, summarised and exported a working model."""
    assert latest_checkpoint_step(job_dir) == final_step
    assert (job_dir / "checkpoints" / "TRAINING_COMPLETE").exists()
    train_tags = summary_tags(job_dir / "logs" / "train")
    assert {"loss", "accuracy", "steps_per_sec"} <= set(train_tags), train_tags
    eval_tags = summary_tags(job_dir / "logs" / "eval")
    assert {"loss", "accuracy"} <= set(eval_tags), eval_tags
    assert max(eval_tags["accuracy"]) == final_step
    accuracy = export_accuracy(single_export(job_dir), eval_files)
    assert accuracy > 0.6, f"exported model accuracy {accuracy:.3f} on held-out digits"
    return accuracy


def hypertune_records(metric_file: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in metric_file.read_text().splitlines() if line.strip()]
