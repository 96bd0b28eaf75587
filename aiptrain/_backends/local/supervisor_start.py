"""Starting a job's detached supervisor: a fresh interpreter, or a fork of a short command.

Either way the supervisor outlives the command that submitted the job, leads a session of its
own (no SIGINT/SIGHUP from the submitter's terminal), writes its output to the job's
supervisor.log, runs in the job's directory, and sees the submitter's environment minus
aiptrain's own secrets, plus the job's run token and home.

- exec (always correct): `python -m aiptrain._backends.local.supervisor --home H --job-key K`, a fresh
  interpreter that imports the job model, the catalog and the engine again: for a short job the
  largest fixed cost after the two commands themselves.
- fork: the submitting command has all of that loaded already, so it forks twice (the
  grandchild is re-parented at once, and never waits as the submitter's zombie) and the
  grandchild runs the supervisor in place. Only a process that asked for it (`allow_forking`:
  the command line's entry point, a short-lived single-threaded program) forks, and only when
  nothing it holds could be carried over half-way: exactly one thread (no lock held by another),
  no connection to the job store left open (SQLite keeps per-process lock state that a child must
  never inherit), and no secret or run token in its environment (a forked process keeps showing
  its parent's environment block in /proc/PID/environ whatever it changes later, and that block
  must neither leak aiptrain's tokens nor carry another job's run token). Anything else execs.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

from aiptrain._replicas.private_env import SECRET_VARIABLES, without_secrets
from aiptrain._replicas.processes import TOKEN_VARIABLE

_SUPERVISOR_MODULE = "aiptrain._backends.local.supervisor"
_SHIELDED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
_fork_allowed = False
_PROC_SELF = Path("/proc/self")
_PR_SET_NAME = 15
# Supervisors exec'd by this process: a thread waits on each, so none stays a zombie.
_exec_children: list[subprocess.Popen[bytes]] = []


def allow_forking(allowed: bool = True) -> None:
    """Let this process fork supervisors when it is safe (see the module docstring)."""
    global _fork_allowed
    _fork_allowed = allowed


def start_supervisor(home: Path, key: int, workdir: Path, log_path: Path, env: Mapping[str, str],
                     *, store_path: Path, release_store: Callable[[], None]) -> int:
    """Start the supervisor of job `key`; its pid. OSError if it cannot be started.

    Before a fork, `release_store` closes this process's connection to the job store at
    `store_path` (the caller reopens it on its next query); if a file of the store is still open
    after that, the supervisor is exec'd instead.
    """
    if _fork_allowed and _may_fork_here():
        release_store()
        if not _has_open_file(str(store_path)):
            return _fork_supervisor(home, key, workdir, log_path, env)
    return _exec_supervisor(home, key, workdir, log_path, env)


def _exec_supervisor(home: Path, key: int, workdir: Path, log_path: Path, env: Mapping[str, str]) -> int:
    with open(log_path, "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", _SUPERVISOR_MODULE, "--home", str(home), "--job-key", str(key)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=workdir, env=dict(env),
            start_new_session=True, close_fds=True,
        )
    _exec_children.append(child)
    threading.Thread(target=child.wait, name=f"reap-supervisor-{child.pid}", daemon=True).start()
    return child.pid


def _may_fork_here() -> bool:
    if not (hasattr(os, "fork") and _PROC_SELF.is_dir()):
        return False
    if any(name in os.environ for name in (*SECRET_VARIABLES, TOKEN_VARIABLE)):
        return False
    return _thread_count() == 1


def _thread_count() -> int:
    """Threads of this process, Python's and native ones alike (a library's pool counts too)."""
    for line in (_PROC_SELF / "status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0  # unknown: never treated as single-threaded


def _has_open_file(prefix: str) -> bool:
    for fd in os.listdir(_PROC_SELF / "fd"):
        with contextlib.suppress(OSError):
            if os.readlink(_PROC_SELF / "fd" / fd).startswith(prefix):
                return True
    return False


def _fork_supervisor(home: Path, key: int, workdir: Path, log_path: Path, env: Mapping[str, str]) -> int:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()  # tidy only: the child never writes through these objects
    reader, writer = os.pipe()
    # Until the supervisor leads a session of its own, a Ctrl-C or a SIGTERM sent to the command's
    # process group would reach it too: the signals wait (blocked) and the supervisor drops them.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SHIELDED)
    try:
        middle = os.fork()
        if middle == 0:  # the intermediate child: fork the supervisor, report its pid, vanish
            code = 1
            try:
                os.close(reader)
                supervisor = os.fork()
                if supervisor == 0:
                    os.close(writer)
                    _become_supervisor(home, key, workdir, log_path, env, mask)  # never returns
                os.write(writer, str(supervisor).encode())
                code = 0
            finally:
                os._exit(code)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    os.close(writer)
    try:
        answer = b""
        while chunk := os.read(reader, 64):
            answer += chunk
    finally:
        os.close(reader)
        os.waitpid(middle, 0)
    if not answer:
        raise OSError("the supervisor process could not be forked")
    return int(answer)


def _become_supervisor(home: Path, key: int, workdir: Path, log_path: Path, env: Mapping[str, str],
                       mask: set[int | signal.Signals]) -> None:
    """In the forked grandchild: shed what belongs to the submitting command, run the job, exit."""
    code = 1
    try:
        os.setsid()
        for signum in _SHIELDED:
            signal.signal(signum, signal.SIG_IGN)  # drops what was sent to the command's group meanwhile
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the command's handler raises into its own code
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _detach_files(log_path)
        os.chdir(workdir)
        os.environ.clear()
        os.environ.update(env)
        argv = [_SUPERVISOR_MODULE, "--home", str(home), "--job-key", str(key)]
        _retitle(argv)
        # What `python -m` does in the exec path, in this interpreter (its imports are loaded).
        sys.argv = argv
        runpy.run_module(_SUPERVISOR_MODULE, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 1
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _detach_files(log_path: Path) -> None:
    """stdin from /dev/null, stdout and stderr to the log; every other inherited descriptor
    (the command's pipes, its launch lock) released. They are pointed at /dev/null rather than
    closed, so that no object still holding one of those numbers can ever close a file opened
    later under the same number."""
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    for name in os.listdir(_PROC_SELF / "fd"):
        fd = int(name)
        if fd > 2 and fd not in (devnull, log):
            with contextlib.suppress(OSError):
                os.dup2(devnull, fd, inheritable=False)
    os.close(log)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - lives as long as the process
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115


def _retitle(argv: list[str]) -> None:
    """Show `argv` as this process's command line in `ps` and /proc/PID/cmdline (a forked supervisor
    would otherwise go on showing the submit command that it was forked from), and its first word
    as its name. The new line is written over the original one, truncated to its length."""
    import ctypes

    with contextlib.suppress(OSError, ValueError, IndexError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(argv[0].encode()[:15]), 0, 0, 0)
        stat = (_PROC_SELF / "stat").read_bytes()
        fields = stat[stat.rindex(b")") + 2 :].split()
        # arg_start and arg_end: fields 48 and 49 of proc(5), counted from the state (field 3).
        start, end = int(fields[48 - 3]), int(fields[49 - 3])
        if end - start < 2:
            return
        text = "\0".join(argv).encode()[: end - start - 1]
        ctypes.memmove(start, text.ljust(end - start, b"\0"), end - start)


def supervisor_environment(base: Mapping[str, str], run_token: str, home: Path,
                           package_parent: str) -> dict[str, str]:
    """What a supervisor sees: `base` minus secrets, with the run token, the home, and this very
    aiptrain importable (installed or not)."""
    env = without_secrets(base)
    env[TOKEN_VARIABLE] = run_token
    env["AIPTRAIN_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    return env

