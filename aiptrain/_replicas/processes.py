"""Starting, watching and stopping replica processes without leaving any behind.

Every replica is the leader of its own session and process group, so a signal to the group
reaches whatever the trainer started too. A replica is started through `_die_with_parent.py`,
which makes the kernel SIGKILL it when its supervisor dies. Every process of a job also carries
an `AIPTRAIN_RUN_TOKEN` variable; `kill_tokened_processes` finds stragglers by that token (even
ones that left their process group), so a pid reused by an unrelated program is never hit.

Exits are detected with `waitid(WNOWAIT)`: the leader stays a zombie, its pid (and so its
group id) cannot be reused, and the group can still be signalled safely before it is reaped.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

TOKEN_VARIABLE = "AIPTRAIN_RUN_TOKEN"  # noqa: S105 - a variable name, not a secret
_PARENT_DEATH_EXEC = Path(__file__).with_name("_die_with_parent.py")
_PROC = Path("/proc")


def process_start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot; None if it does not exist."""
    stat = _stat_fields(pid)
    return int(stat[19]) if stat else None


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name is in parentheses and may contain spaces; fields follow the last ')'.
    return text[text.rindex(")") + 2 :].split()


def is_running(pid: int, start_ticks: int | None = None) -> bool:
    """True if `pid` is a live (not zombie) process, and the same one if start_ticks is given."""
    if not _PROC.is_dir():
        return _signal_zero(pid)  # no /proc (not Linux): existence is all we can tell
    stat = _stat_fields(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return False
    return start_ticks is None or int(stat[19]) == start_ticks


def _signal_zero(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe_returncode(returncode: int) -> str:
    """`exited with a non-zero status of 1` / `was killed by signal 9 (SIGKILL)`."""
    if returncode < 0:
        return f"was killed by signal {-returncode} ({signal_name(-returncode)})"
    if returncode == 0:
        return "exited successfully"
    return f"exited with a non-zero status of {returncode}"


@dataclass
class ManagedProcess:
    """A started replica process: its Popen plus the identity needed to signal it safely."""

    popen: subprocess.Popen[bytes]
    start_ticks: int | None
    # A pidfd (Linux 5.3+), readable once the process exited; opened when someone waits on it.
    _exit_fd: int | None = field(default=None, repr=False)
    # reap() runs from more than one thread (a Ray replica's output pump and its stop): the
    # pidfd must be closed exactly once, or the second close fails (EBADF) and that thread dies.
    _reap_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def pgid(self) -> int:
        return self.popen.pid  # a session leader's group id is its pid

    @property
    def stdout(self) -> IO[bytes]:
        assert self.popen.stdout is not None  # started with stdout=PIPE
        return self.popen.stdout

    @property
    def stderr(self) -> IO[bytes]:
        assert self.popen.stderr is not None  # started with stderr=PIPE
        return self.popen.stderr

    def has_exited(self) -> bool:
        """True once the leader exited; it is not reaped, so the group id stays ours."""
        if self.popen.returncode is not None:
            return True
        if not hasattr(os, "waitid"):
            return self.popen.poll() is not None  # reaps: the group can no longer be signalled
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return self.popen.poll() is not None
        return info is not None

    def signal_group(self, sig: int) -> None:
        if self.popen.returncode is not None:
            return  # reaped: the group id may belong to someone else now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)

    def exit_fd(self) -> int | None:
        """A descriptor that becomes readable when the process exits (None: already reaped, or no
        pidfd here); closed by `reap`."""
        with self._reap_lock:
            if self._exit_fd is None and self.popen.returncode is None and hasattr(os, "pidfd_open"):
                with contextlib.suppress(OSError):
                    self._exit_fd = os.pidfd_open(self.pid)
            return self._exit_fd

    def reap(self) -> int:
        """Kill what is left of the group, then collect the leader's exit status."""
        self.signal_group(signal.SIGKILL)
        returncode = self.popen.wait()
        with self._reap_lock:
            descriptor, self._exit_fd = self._exit_fd, None
        if descriptor is not None:
            os.close(descriptor)
        return returncode


def wait_for_any_exit(processes: Iterable[ManagedProcess], timeout: float) -> bool:
    """Block until one of `processes` exits or `timeout` seconds pass, without polling where the
    kernel can tell (pidfds); False when it cannot, and the caller must poll (it did not wait)."""
    descriptors = [process.exit_fd() for process in processes if process.popen.returncode is None]
    if not descriptors or None in descriptors:
        return False
    poller = select.poll()
    for descriptor in descriptors:
        assert descriptor is not None
        poller.register(descriptor, select.POLLIN)
    poller.poll(max(0.0, timeout) * 1000)
    return True


def dying_with_this_thread(cores: Collection[int] = ()) -> list[str]:
    """The launcher to put before a program's argv so that the kernel kills the program when the
    calling thread ends (`_die_with_parent.py`), pinned to `cores` if any."""
    pinned = ",".join(str(core) for core in sorted(cores)) or "-"
    return [sys.executable, "-I", "-S", str(_PARENT_DEATH_EXEC), str(os.getpid()), pinned]


def start_process(
    argv: list[str], *, env: dict[str, str], cwd: Path, die_with_parent: bool = True,
    cores: Collection[int] = (),
) -> ManagedProcess:
    """Start `argv` in a new session with stdout/stderr piped, stdin closed.

    With `die_with_parent`, the kernel kills it when the calling *thread* ends, so call this
    from a thread that outlives the process (the replica-set loop does). `cores`, if any, are the
    CPUs it is pinned to (only with `die_with_parent`, whose launcher pins it before it starts).
    """
    prefix = dying_with_this_thread(cores) if die_with_parent else []
    popen = subprocess.Popen(
        prefix + argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
    )
    return ManagedProcess(popen, process_start_ticks(popen.pid))


def stop_processes(processes: Iterable[ManagedProcess], grace: float) -> None:
    """SIGTERM every group, SIGKILL what is still there after `grace` seconds, reap all."""
    pending = [p for p in processes if p.popen.returncode is None]
    for process in pending:
        process.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        running = [p for p in pending if not p.has_exited()]
        if not running:
            break
        if not wait_for_any_exit(running, deadline - time.monotonic()):
            time.sleep(0.05)
    for process in pending:
        process.reap()


_TOKEN_MARKER = b"\0" + TOKEN_VARIABLE.encode() + b"="


def _token_of(pid: int) -> str | None:
    # Called for every process of the machine at each sweep: one read and one search, no split.
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            environ = b"\0" + file.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    start = environ.find(_TOKEN_MARKER)
    if start < 0:
        return None
    start += len(_TOKEN_MARKER)
    end = environ.find(b"\0", start)
    return environ[start : end if end >= 0 else None].decode(errors="replace")


def run_token_of(pid: int) -> str | None:
    """The AIPTRAIN_RUN_TOKEN in the process's environment, if it has one we can read."""
    return _token_of(pid)


def tokened_processes(token: str) -> list[int]:
    """Live pids whose AIPTRAIN_RUN_TOKEN is `token` or starts with `token/`."""
    found: list[int] = []
    if not _PROC.is_dir():
        return found
    for name in os.listdir(_PROC):
        if not name.isdigit():
            continue
        pid = int(name)
        value = _token_of(pid)
        if value is not None and (value == token or value.startswith(token + "/")) and is_running(pid):
            found.append(pid)
    return found


def kill_until_gone(find: Callable[[], list[int]], rounds: int = 5) -> list[int]:
    """SIGKILL what `find` returns, again and again while it returns something (a victim may be
    forking); every pid killed, in order."""
    killed: list[int] = []
    for _ in range(rounds):
        victims = find()
        if not victims:
            break
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        time.sleep(0.05)
    return killed


def kill_tokened_processes(token: str, *, exclude: Iterable[int] = ()) -> list[int]:
    """SIGKILL every process carrying the token (repeatedly, in case one was forking)."""
    skip = set(exclude) | {os.getpid()}
    return kill_until_gone(lambda: [pid for pid in tokened_processes(token) if pid not in skip])
