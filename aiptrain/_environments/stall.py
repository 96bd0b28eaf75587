"""Telling an installer that is stuck from one that is slow.

uv gives up on a silent connection by itself (a 30 s read timeout, retried), but not on a lock of
its cache held by a process that never lets go: a build then waits for ever, its last line uv's
"Using Python ... environment at: ...". pip behaves alike. So a build's process group is watched
from outside, in what the kernel counts for it (Linux `/proc`):

- bytes read and written (`rchar`/`wchar`: files, pipes and sockets alike) and CPU time, summed
  over the group's processes: any change is progress (a download, an unpacking, a compile, a
  resolution);
- a process blocked on a file lock (`/proc/locks`) progresses as the lock's holder does: waiting
  for another job's build of the same wheel is not a stall while that build moves.

No change for `limit` seconds is a stall. The callers kill the group, try once more
(`once_more_if_stalled`), then fail with `StallWatch.explain()`'s line.
`AIPTRAIN_INSTALL_STALL_SECONDS` sets the limit (0: never).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from aiptrain.errors import UsageError

SETTING = "AIPTRAIN_INSTALL_STALL_SECONDS"
# uv itself gives up on a silent connection after about two minutes (four tries of 30 s): a longer
# silence is one uv will not end.
DEFAULT_LIMIT = 120.0
# How often the group is looked at: cheap (a few small /proc reads per process).
SAMPLE_SECONDS = 2.0


def stall_limit(env: Mapping[str, str] | None = None) -> float:
    """The setting's seconds (0 turns the watch off); a bad value is the user's error, named."""
    raw = (os.environ if env is None else env).get(SETTING, "").strip()
    if not raw:
        return DEFAULT_LIMIT
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"{SETTING}={raw!r} is not a number of seconds",
                         hint=f"set {SETTING} to seconds, e.g. 300, or 0 to never stop a silent install") from None
    if value < 0:
        raise UsageError(f"{SETTING}={raw} is negative", hint=f"set {SETTING} to 0 or more seconds")
    return value


Result = TypeVar("Result")


def once_more_if_stalled(attempt: Callable[[], Result], stall_of: Callable[[Result], str | None],
                         say: Callable[[str], None]) -> Result:
    """`attempt()`, and once more when `stall_of` its result names a stall (said first): a stuck
    connection or lock rarely sticks twice. The second result is returned as it is."""
    first = attempt()
    reason = stall_of(first)
    if reason is None:
        return first
    say(f"{reason}; it was stopped and runs once more.")
    return attempt()


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _stat_fields(pid: str | int) -> list[str]:
    """`/proc/PID/stat` after the command name: state, ppid, pgrp, ... (empty once it is gone)."""
    return _read(f"/proc/{pid}/stat").rpartition(")")[2].split()


def _processes() -> dict[int, list[str]]:
    """Every process's stat fields, read once per sample."""
    return {int(name): fields for name in os.listdir("/proc")
            if name.isdigit() and len(fields := _stat_fields(name)) > 12}


def _activity(pid: int, fields: list[str]) -> tuple[int, int, int]:
    """What grows while `pid` works: bytes read, bytes written, CPU ticks (utime + stime)."""
    io = dict(line.split(":", 1) for line in _read(f"/proc/{pid}/io").splitlines() if ":" in line)
    return int(io.get("rchar", 0) or 0), int(io.get("wchar", 0) or 0), int(fields[11]) + int(fields[12])


@dataclass(frozen=True)
class _Locks:
    """`/proc/locks`: who holds each locked file, and which process waits for which file."""

    holders: dict[str, list[int]]
    waiting: dict[int, str]

    @classmethod
    def read(cls) -> _Locks:
        holders: dict[str, list[int]] = {}
        waiting: dict[int, str] = {}
        for line in _read("/proc/locks").splitlines():
            parts = line.split()
            blocked = "->" in parts
            if blocked:
                parts.remove("->")
            if len(parts) < 6 or not parts[4].lstrip("-").isdigit():
                continue
            pid, inode = int(parts[4]), parts[5]
            if blocked:
                waiting[pid] = inode
            else:
                holders.setdefault(inode, []).append(pid)
        return cls(holders, waiting)


@dataclass
class StallWatch:
    """The process group `pgid`, sampled with `check()`; `clock` is for tests."""

    pgid: int
    limit: float
    clock: Callable[[], float] = time.monotonic
    _last: tuple[int, ...] = field(default=(), init=False)
    _since: float = field(default=0.0, init=False)
    _next_sample: float = field(default=0.0, init=False)
    _holders: list[int] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self._since = self._next_sample = self.clock()

    def check(self) -> bool:
        """True once the group has shown no progress for `limit` seconds (never with limit 0)."""
        if self.limit <= 0:
            return False
        now = self.clock()
        if now < self._next_sample:
            return now - self._since >= self.limit
        self._next_sample = now + SAMPLE_SECONDS
        sample = self._sample()
        if sample != self._last:
            self._last, self._since = sample, now
        return now - self._since >= self.limit

    def _sample(self) -> tuple[int, ...]:
        processes = _processes()
        group_of = {pid: fields[2] for pid, fields in processes.items()}
        members = [pid for pid, group in group_of.items() if group == str(self.pgid)]
        locks = _Locks.read()
        holders = sorted({holder for pid in members if pid in locks.waiting
                          for holder in locks.holders.get(locks.waiting[pid], []) if holder not in members})
        self._holders = holders
        # A holder's helpers work for it (uv's build of a wheel, a child that downloads): its group counts.
        holder_groups = {group_of[holder] for holder in holders if holder in group_of}
        counted = [pid for pid, group in group_of.items()
                   if group == str(self.pgid) or group in holder_groups or pid in holders]
        total = [0, 0, 0]
        for pid in counted:
            for index, value in enumerate(_activity(pid, processes[pid])):
                total[index] += value
        return (*total, len(members), *holders)

    def explain(self, what: str) -> str:
        """One line for a stalled `what`: how long, and whose lock it waited for, if any."""
        seconds = f"{self.limit:.0f} s"
        if self._holders:
            named = ", ".join(f"process {pid} ({_command(pid)})" for pid in self._holders)
            return (f"{what} made no progress for {seconds}, waiting for a lock held by {named}, which made none "
                    f"either; stop that process, or raise {SETTING}")
        return (f"{what} made no progress for {seconds} (no bytes read or written, no CPU): the package index "
                f"or the network stalled; check them, or raise {SETTING}")


def _command(pid: int) -> str:
    words = _read(f"/proc/{pid}/cmdline").split("\0")
    return " ".join(word for word in words[:4] if word) or "gone"
