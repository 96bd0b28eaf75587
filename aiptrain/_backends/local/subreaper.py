"""The supervisor as the subreaper of its job: no descendant outlives the job.

Replicas run in process groups of their own, and every process carries the job's run token, but
a trainer's child may call `setsid` (leaving the group) and clear its environment (dropping the
token). With PR_SET_CHILD_SUBREAPER, such an orphan is re-parented to the supervisor instead of
init, so at the end of the job every process below the supervisor is found by walking parent
links in /proc, and killed. (cgroups v2 would do the same, but are rarely writable by the user.)
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Callable
from pathlib import Path

from aiptrain._replicas.processes import kill_until_gone

_PR_SET_CHILD_SUBREAPER = 36
_PROC = Path("/proc")


def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process; False where Linux cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid -> parent pid of every live (not zombie) process."""
    parents: dict[int, int] = {}
    for entry in _PROC.iterdir() if _PROC.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if fields[0] not in ("Z", "X"):
            parents[int(entry.name)] = int(fields[1])
    return parents


def descendants(root: int, spare: Callable[[int], bool] = lambda pid: False) -> list[int]:
    """Every live process below `root`, by parent links, except subtrees whose top is `spare`d."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found: list[int] = []
    stack = list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        if spare(pid):
            continue
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def kill_descendants(root: int | None = None, spare: Callable[[int], bool] = lambda pid: False) -> list[int]:
    """SIGKILL everything below `root` (this process by default) but the `spare`d subtrees,
    repeatedly while it forks; then collect those that were our own children (no zombies)."""
    me = os.getpid() if root is None else root
    killed = kill_until_gone(lambda: descendants(me, spare), rounds=10)
    if root is None:
        for pid in set(killed):
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
    return killed
