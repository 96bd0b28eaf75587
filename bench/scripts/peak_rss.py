"""Run a command and report its peak resident set: `python peak_rss.py OUT_FILE CMD [ARGS...]`.

Writes "<ru_maxrss in KiB> <exit code> <this launcher's own VmRSS in KiB>" to OUT_FILE.

Why a separate launcher: Linux starts a new program's peak-RSS record with the peak of the
process image it replaced, and `subprocess` spawns children by sharing the parent's memory
until exec. Measured straight from the benchmark process, every figure would be at least the
benchmark's own size. This launcher is a bare interpreter (its own resident set is reported
too), so whatever it starts is measured from a small floor. The figure is the larger of the
command's own peak and that of every descendant it waited for.
"""

import os
import sys


def own_rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main() -> int:
    out_file, argv = sys.argv[1], sys.argv[2:]
    launcher_kib = own_rss_kib()
    pid = os.posix_spawnp(argv[0], argv, os.environ)
    _, status, usage = os.wait4(pid, 0)
    with open(out_file, "w") as out:
        out.write(f"{usage.ru_maxrss} {os.waitstatus_to_exitcode(status)} {launcher_kib}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
