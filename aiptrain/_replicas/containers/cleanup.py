"""Removing what a job created on the container engine, whatever ended it.

Everything aiptrain creates there carries the job's label (its run token) and its set's; a set
removes its own at its end (`ContainerLauncher.close`). A supervisor that was killed removes
nothing, so before a job creates anything the engine it uses (command line and daemon
variables) is written into the job's files (`record_engine`), and whoever finds the job's
supervisor dead (the local backend's reaper) removes everything with the job's label from that
engine (`remove_job_containers`). A set's scratch directory on the host is a `scratch` one; the
guard of an owner no reaper watches removes it too.

An engine that was killed (or whose daemon is restarting) answers no removal, while the containers
of a daemon that died can run on (their shims outlive it), and a daemon that comes back keeps the
stopped ones and the network. So what could not be removed is noted, one file per label under the
home's `container_leftovers` (`removed_or_noted`), and removed with the note when the engine
answers again: at the next replica set's start on this machine, and at every job's end
(`sweep_leftovers`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

from aiptrain._paths import HomeLayout
from aiptrain._replicas.containers.container_engine import ContainerEngine, EngineCallFailed, engine_answers
from aiptrain._replicas.containers.labels import JOB_LABEL
from aiptrain._replicas.scratch import remove_directories


def remove_labelled(engine: ContainerEngine, label: str) -> bool:
    """Remove the containers (with their anonymous volumes), networks and volumes labelled `label`;
    False when the engine could not be asked or refused a removal."""
    done = True
    for kind, remove in (("container", ["rm", "--force", "--volumes"]), ("network", ["network", "rm"]),
                         ("volume", ["volume", "rm", "--force"])):
        listing = ["ps", "--all"] if kind == "container" else [kind, "ls"]
        listed = engine.run([*listing, "--quiet", "--filter", f"label={label}"], check=False)
        if listed.returncode != 0:
            done = False
            continue
        found = listed.stdout.decode(errors="replace").split()
        if found:
            done = engine.run([*remove, "--", *found], check=False, timeout=300).returncode == 0 and done
    return done


def record_engine(path: Path, engine: ContainerEngine) -> None:
    """Say, in the job's files, which engine its containers run on (read by `remove_job_containers`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    made = path.with_name(f"{path.name}.{os.getpid()}")
    made.write_text(json.dumps(engine.to_json()))
    os.replace(made, path)


def remove_job_containers(path: Path, job_token: str) -> bool:
    """Remove everything the job of `job_token` created on the engine `path` names; False when the
    job never recorded one (it started no container)."""
    try:
        engine = ContainerEngine.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError):
        return False
    label = f"{JOB_LABEL}={job_token}"
    with contextlib.suppress(EngineCallFailed):
        removed = remove_labelled(engine, label)
        removed_or_noted(engine, label, removed)
        if removed:  # the engine answers: what earlier jobs left on it goes too
            sweep_leftovers(engine)
    return True


# -- what an engine that had gone away could not remove ----------------------------------------


def _folder() -> Path:
    return HomeLayout.of().container_leftovers


def record_leftovers(engine: ContainerEngine, label: str) -> None:
    """Note that what carries `label` on `engine` is still to be removed."""
    folder = _folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (hashlib.sha256(f"{engine.to_json()}{label}".encode()).hexdigest()[:24] + ".json")
    made = path.with_name(f"{path.name}.{os.getpid()}")
    made.write_text(json.dumps({"engine": engine.to_json(), "label": label}))
    os.replace(made, path)


def sweep_leftovers(engine: ContainerEngine) -> int:
    """Remove what the notes name on `engine` (which answers), and the notes; how many were swept."""
    folder = _folder()
    if not folder.is_dir():
        return 0
    swept = 0
    for note in sorted(folder.glob("*.json")):
        try:
            data = json.loads(note.read_text())
            noted, label = ContainerEngine.from_json(data["engine"]), str(data["label"])
        except (OSError, ValueError, KeyError, TypeError):
            note.unlink(missing_ok=True)  # unreadable: nothing can be done with it
            continue
        if noted != engine:
            continue  # another engine's (another daemon): swept when that one is used
        with contextlib.suppress(EngineCallFailed):
            if remove_labelled(engine, label):
                note.unlink(missing_ok=True)
                swept += 1
    return swept


def removed_or_noted(engine: ContainerEngine, label: str, removed: bool) -> None:
    """After a removal by `label`: when it failed because the engine is gone, note the leftovers."""
    if not removed and not engine_answers(engine):
        record_leftovers(engine, label)


class RemovalGuard:
    """A process that removes everything labelled `label` from `engine`, and the scratch directories
    `scratch`, once its owner is gone.

    For owners no reaper watches (a Ray replica's actor, whose node may lose it at any moment): the
    guard waits for the end of a pipe only its owner holds, which the kernel closes however the
    owner ends; `close()` ends it on purpose. It lives in a session of its own, so signals to the
    owner's process group do not reach it.
    """

    def __init__(self, engine: ContainerEngine, label: str, scratch: Sequence[Path] = ()) -> None:
        import subprocess
        import sys

        root = str(Path(__file__).resolve().parents[3])  # the directory holding the aiptrain package
        env = engine.process_environment({"PYTHONPATH": root})
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
             "from aiptrain._replicas.containers.cleanup import main; main(sys.argv[2:])", root,
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

    engine, label, scratch = ContainerEngine.from_json(json.loads(argv[0])), argv[1], argv[2:]
    with contextlib.suppress(OSError):
        while sys.stdin.buffer.read(4096):
            pass
    with contextlib.suppress(EngineCallFailed):
        remove_labelled(engine, label)
    remove_directories(scratch)
