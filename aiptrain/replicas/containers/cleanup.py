"""Removing what a job created on the container engine, whatever ended it.

Everything aiptrain creates there carries the job's label (its run token) and its set's; a set
removes its own at its end (`ContainerLauncher.close`). A supervisor that was killed removes
nothing, so before a job creates anything the engine it uses (command line and daemon
variables) is written into the job's files (`record_engine`), and whoever finds the job's
supervisor dead (the local backend's reaper) removes everything with the job's label from that
engine (`remove_job_containers`). A set's scratch directory on the host is a `scratch` one; the
guard of an owner no reaper watches removes it too.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

from aiptrain.replicas.containers.engine import Engine, EngineCallFailed
from aiptrain.replicas.containers.labels import JOB_LABEL
from aiptrain.replicas.scratch import remove_directories


def remove_labelled(engine: Engine, label: str) -> None:
    """Remove the containers (with their anonymous volumes), networks and volumes labelled `label`."""
    containers = engine.output(["ps", "--all", "--quiet", "--filter", f"label={label}"], check=False).split()
    if containers:
        engine.run(["rm", "--force", "--volumes", *containers], check=False, timeout=300)
    networks = engine.output(["network", "ls", "--quiet", "--filter", f"label={label}"], check=False).split()
    if networks:
        engine.run(["network", "rm", *networks], check=False)
    volumes = engine.output(["volume", "ls", "--quiet", "--filter", f"label={label}"], check=False).split()
    if volumes:
        engine.run(["volume", "rm", "--force", *volumes], check=False)


def record_engine(path: Path, engine: Engine) -> None:
    """Say, in the job's files, which engine its containers run on (read by `remove_job_containers`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    made = path.with_name(f"{path.name}.{os.getpid()}")
    made.write_text(json.dumps(engine.to_json()))
    os.replace(made, path)


def remove_job_containers(path: Path, job_token: str) -> bool:
    """Remove everything the job of `job_token` created on the engine `path` names; False when the
    job never recorded one (it started no container)."""
    try:
        engine = Engine.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError):
        return False
    with contextlib.suppress(EngineCallFailed):
        remove_labelled(engine, f"{JOB_LABEL}={job_token}")
    return True


class RemovalGuard:
    """A process that removes everything labelled `label` from `engine`, and the scratch directories
    `scratch`, once its owner is gone.

    For owners no reaper watches (a Ray replica's actor, whose node may lose it at any moment): the
    guard waits for the end of a pipe only its owner holds, which the kernel closes however the
    owner ends; `close()` ends it on purpose. It lives in a session of its own, so signals to the
    owner's process group do not reach it.
    """

    def __init__(self, engine: Engine, label: str, scratch: Sequence[Path] = ()) -> None:
        import subprocess
        import sys

        root = str(Path(__file__).resolve().parents[3])  # the directory holding the aiptrain package
        env = engine.process_environment({"PYTHONPATH": root})
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
             "from aiptrain.replicas.containers.cleanup import main; main(sys.argv[2:])", root,
             json.dumps(engine.to_json()), label, *map(str, scratch)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True)

    def close(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        with contextlib.suppress(Exception):
            self.process.wait(timeout=60)


def main(argv: list[str]) -> None:
    """The guard: wait for the end of stdin, then remove what carries the label and the scratch."""
    import sys

    engine, label, scratch = Engine.from_json(json.loads(argv[0])), argv[1], argv[2:]
    with contextlib.suppress(OSError):
        while sys.stdin.buffer.read(4096):
            pass
    with contextlib.suppress(EngineCallFailed):
        remove_labelled(engine, label)
    remove_directories(scratch)
