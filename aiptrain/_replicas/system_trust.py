"""The system's CA bundle, as a replica sees it, extended with the installation's CA.

TensorFlow releases before 2.4 (the first to read `CURL_CA_BUNDLE`; runtimes 1.15 and 2.1 run
them) verify `https://www.googleapis.com` against the file their libcurl was built with,
/etc/ssl/certs/ca-certificates.crt, and nothing else. The proxy's certificate is signed by the
installation's CA, which is not in that file, so their gs:// failed ("self signed certificate in
certificate chain"). Editing the system's file would need root and change it for everyone;
instead each replica starts in a mount namespace of its own where a copy of the file with the
installation's CA appended is bind-mounted over it. Nothing outside the replica (and what it
starts) sees the copy.

A user other than root gets the mount namespace inside a user namespace that maps their own uid
and gid to themselves (files, signals and /proc look as before; setuid programs run without
their privilege there). Root needs only the mount namespace.

Run between the supervisor and the replica (`_die_with_parent.py` calls `enter` when the replica's
environment has `TRUST_VARIABLE`); `python -I -S system_trust.py --probe BUNDLE` tells whether
it works on this machine. Standard library only: it runs before the replica's interpreter.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Mapping

TRUST_VARIABLE = "AIPTRAIN_SYSTEM_CA_BUNDLE"
# Where system libraries look for the CA bundle: Debian/Ubuntu/Alpine (and what TensorFlow's
# libcurl is built with), RHEL/Fedora, and BoringSSL's and LibreSSL's default.
SYSTEM_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_PRIVATE = 0x40000


def system_bundles() -> list[str]:
    """The system bundles present on this machine (each is covered by the extended copy)."""
    return [path for path in SYSTEM_BUNDLES if os.path.isfile(path)]


def enter(bundle: str) -> None:
    """Make `bundle` this process's view of every system CA bundle (and of what it starts).
    OSError saying why when the kernel refuses; the process is then unchanged, unless the
    refusal came after the namespaces were made (only the bind mount is then missing)."""
    targets = system_bundles()
    if not targets:
        raise OSError("this machine has no system CA bundle to extend")
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    as_root = uid == 0 and libc.unshare(_CLONE_NEWNS) == 0
    if not as_root:
        if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS) != 0:
            raise _error("unshare", ctypes.get_errno())
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    # Private first: a bind mount must not travel back to the namespace it came from.
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise _error("mount --make-rprivate /", ctypes.get_errno())
    for target in targets:
        if libc.mount(os.fsencode(bundle), os.fsencode(target), None, _MS_BIND, None) != 0:
            raise _error(f"mount --bind {bundle} {target}", ctypes.get_errno())


def _write(path: str, text: str) -> None:
    with open(path, "w") as stream:
        stream.write(text)


def _error(what: str, number: int) -> OSError:
    return OSError(number, f"{what}: {os.strerror(number)}")


def trusting(argv: list[str], env: Mapping[str, str]) -> list[str]:
    """`argv` run through this module (`--exec`) when `env` asks for the extended bundle: for a
    program started with a replica's environment but not by the replica launcher."""
    if not env.get(TRUST_VARIABLE):
        return argv
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), "--exec", *argv]


def main(argv: list[str]) -> int:
    """`--probe BUNDLE`: exit 0 if `enter` works here, else 1 with the reason on stderr.
    `--exec PROGRAM ARGS...`: run PROGRAM with the bundle of `TRUST_VARIABLE`."""
    if len(argv) >= 2 and argv[0] == "--exec":
        try:
            enter(os.environ[TRUST_VARIABLE])
        except (OSError, KeyError) as error:
            sys.stderr.write(f"aiptrain: the system's CA bundle was left as it is: {error}\n")
        os.execvp(argv[1], argv[1:])  # noqa: S606 - an argument list, never a shell string
    if len(argv) != 2 or argv[0] != "--probe":
        sys.stderr.write("usage: system_trust.py --probe BUNDLE | --exec PROGRAM [ARGS...]\n")
        return 2
    try:
        enter(argv[1])
    except OSError as error:
        sys.stderr.write(f"{error.strerror or error}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
