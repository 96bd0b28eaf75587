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
    # Not Linux, nothing armed: the supervisor's process-group and token sweeps still clean up.
    signal_on_parent_death(signal.SIGKILL)
    if os.getppid() != parent:
        # The parent died before prctl took effect: nobody would ever stop this replica.
        os._exit(1)
    if os.environ.get("AIPTRAIN_SYSTEM_CA_BUNDLE"):
        _extend_system_trust(os.environ["AIPTRAIN_SYSTEM_CA_BUNDLE"])
    os.execvp(argv[0], argv)  # noqa: S606 - an argument list, never a shell string


def signal_on_parent_death(signum: int) -> bool:
    """Ask the kernel to send `signum` to this process when its parent dies (it survives exec);
    False where there is no prctl (not Linux). The Ray driver arms it too (backends/ray/parent_watch.py)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    except (OSError, AttributeError):
        return False
    return True


def _extend_system_trust(bundle: str) -> None:
    """The replica sees the system's CA bundle with the storage endpoint's CA added (see
    `system_trust.py`, the file beside this one, loaded by path: this script runs with `-I`, so
    aiptrain is not importable here)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "system_trust", os.path.join(os.path.dirname(os.path.abspath(__file__)), "system_trust.py"))
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        module.enter(bundle)
    except OSError as error:  # the supervisor checked it works and said so in the job's log if not
        sys.stderr.write(f"aiptrain: the system's CA bundle was left as it is: {error.strerror or error}\n")


if __name__ == "__main__":
    main()
