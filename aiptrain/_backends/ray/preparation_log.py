"""PREPARING on Ray, as the job's log tells it: which node builds which environment, who waits.

The driver hands in what the replicas' actors report (`node_preparation`'s events and outcomes)
and prints the lines this returns. Pure: no Ray, no clock of its own (the driver passes `now`).

    Building runtime 1.15 on node 10.0.0.3 (4 of 4 replicas waiting).
    node 10.0.0.3: Resolved 50 packages in 3.37s
    Runtime 1.15 is ready on node 10.0.0.3 (built in 41 s): TensorFlow 1.15.0 on Python 3.7 (PATH).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from aiptrain._backends.ray.node_preparation import BUILD, INSTALL, NOTE, PHASE, READY

Line = tuple[str, str]  # (severity, message)
# Seconds between two "still building" lines of one node while uv says nothing.
HEARTBEAT_SECONDS = 30.0


@dataclass
class _Node:
    label: str
    phase: str = ""  # "", "waiting", "building", "ready"
    since: float = 0.0  # when the phase began
    last_line: float = 0.0
    builder: str | None = None  # the task whose actor builds here
    runs: dict[str, str] | None = None  # once ready: what the node runs


@dataclass
class PreparationLog:
    """The lines of one replica set's PREPARING; `nodes`: task name -> node label."""

    runtime_version: str
    nodes: dict[str, str]
    builds: bool = True  # False with AIPTRAIN_RAY_RUNTIME_PACKAGES=cluster: no environment to prepare
    done: set[str] = field(default_factory=set)
    env_ready: set[str] = field(default_factory=set)
    said: set[str] = field(default_factory=set)
    _by_label: dict[str, _Node] = field(default_factory=dict)

    def _node(self, task: str) -> _Node:
        label = self.nodes[task]
        return self._by_label.setdefault(label, _Node(label))

    def waiting(self) -> str:
        total = len(self.nodes)
        return f"{total - len(self.done)} of {total} replicas waiting"

    def event(self, task: str, kind: str, severity: str, message: str, now: float) -> list[Line]:
        """The lines for one event of `task`'s preparation."""
        node = self._node(task)
        node.last_line = now
        handlers = {NOTE: self._note, PHASE: self._phase, READY: self._ready, BUILD: self._build_line,
                    INSTALL: self._install_line}
        handler = handlers.get(kind)
        return handler(task, node, severity, message, now) if handler is not None else []

    def _note(self, _task: str, node: _Node, severity: str, message: str, _now: float) -> list[Line]:
        if message in self.said:
            return []  # the same on every node: said once
        self.said.add(message)
        return [(severity, f"On node {node.label}: {message}")]

    def _build_line(self, task: str, node: _Node, severity: str, message: str, _now: float) -> list[Line]:
        # Only the builder's lines (uv's progress, the build's summary), not a waiter's.
        return [(severity, f"node {node.label}: {message}")] if node.builder == task else []

    @staticmethod
    def _install_line(task: str, _node: _Node, severity: str, message: str, _now: float) -> list[Line]:
        return [(severity, f"{task}: {message}")]

    def _phase(self, task: str, node: _Node, _severity: str, phase: str, now: float) -> list[Line]:
        node.phase, node.since = phase, now
        if phase == "building":
            node.builder = task
            return [("INFO", f"Building runtime {self.runtime_version} on node {node.label} ({self.waiting()}).")]
        if phase == "waiting":
            return [("INFO", f"Waiting on node {node.label}: runtime {self.runtime_version}'s environment is being "
                             f"built there by another job, or another node sharing its cache ({self.waiting()}).")]
        return []

    def _ready(self, task: str, node: _Node, _severity: str, message: str, now: float) -> list[Line]:
        self.env_ready.add(task)
        runs: dict[str, str] = json.loads(message)
        if node.runs is not None:
            return []  # the node's first replica said it
        previous, node.phase, node.runs = node.phase, "ready", runs
        what = f"TensorFlow {runs['tensorflow']} on Python {runs['python']} ({runs['root']})"
        how = {"building": f"built in {now - node.since:.0f} s", "waiting": "built by the other build"}
        return [("INFO", f"Runtime {self.runtime_version} is ready on node {node.label} "
                         f"({how.get(previous, 'found in its cache')}): {what}.")]

    def finished(self, task: str) -> None:
        """`task`'s preparation ended well."""
        self.done.add(task)

    def failure(self, task: str, error: str) -> str:
        """The job's errorMessage for `task`'s failed preparation, naming its node."""
        if self.builds and task not in self.env_ready:
            return f"On node {self.nodes[task]} ({task}): {error}"
        return f"{task}: {error}"

    def heartbeat(self, now: float) -> list[Line]:
        """A line for each node whose build has said nothing for HEARTBEAT_SECONDS."""
        lines = []
        for node in self._by_label.values():
            if node.phase == "building" and now - node.last_line >= HEARTBEAT_SECONDS:
                node.last_line = now
                lines.append(("INFO", f"Still building runtime {self.runtime_version} on node {node.label} "
                                      f"({now - node.since:.0f} s; {self.waiting()})."))
        return lines

    def mismatch(self) -> str | None:
        """The job's errorMessage when the nodes run different environments (one has the runtime's
        Python, another fell back): replicas of one cluster must run one TensorFlow."""
        ready = {node.label: node.runs for node in self._by_label.values() if node.runs is not None}
        if len({(r["environment"], r["tensorflow"], r["python"]) for r in ready.values()}) <= 1:
            return None
        each = "; ".join(f"node {label}: {r['environment']} (TensorFlow {r['tensorflow']} on Python {r['python']})"
                         for label, r in sorted(ready.items()))
        return (f"The replicas' nodes would run different environments for runtime {self.runtime_version}: {each}. "
                "Make the same Python available on every node (AIPTRAIN_PYTHONS, uv python install, pyenv, or let uv "
                "download it: AIPTRAIN_PYTHON_DOWNLOADS) so that every replica runs one TensorFlow.")
