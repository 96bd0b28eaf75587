"""Exec a program that is killed (SIGKILL) when the thread that started it goes away.

Run as a script (`python -I -S _die_with_parent.py PARENT_PID CORES PROGRAM ARGS...`) between the
supervisor and each replica: prctl(PR_SET_PDEATHSIG) survives exec, so a replica cannot outlive
a supervisor that crashed or was killed. CORES (`0,1,5`, or `-` for no change) pins the replica
to those CPUs before its first thread exists, so every thread it starts inherits them. This file
imports nothing from aiptrain, because it runs before the replica's own interpreter starts and
must stay fast.
"""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main() -> None:
    parent = int(sys.argv[1])
    cores = sys.argv[2]
    argv = sys.argv[3:]
    if cores != "-" and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {int(core) for core in cores.split(",")})
        except OSError:
            pass  # a core went offline since it was counted: the replica runs unpinned
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the supervisor's process-group and token sweeps still clean up
    if os.getppid() != parent:
        # The parent died before prctl took effect: nobody would ever stop this replica.
        os._exit(1)
    os.execvp(argv[0], argv)  # noqa: S606 - an argument list, never a shell string


if __name__ == "__main__":
    main()
