"""Whose process is on the other end of a loopback connection to the storage endpoint.

The endpoint serves the job's `gs://` from files under a 0700 AIPTRAIN_HOME; on 127.0.0.1 any
user of the machine could otherwise connect and read, write or delete them. A per-request secret
would not do: google-cloud-storage pointed at an emulator (STORAGE_EMULATOR_HOST), gcsfs and
`gcloud storage` with credentials disabled send no credential at all. The kernel knows who owns
each socket, though: Linux lists every TCP socket of this network namespace in /proc/net/tcp with
its owner's uid, so the endpoint finds the client's end of the connection there and serves only
connections whose owner is its own user (the job's replicas and whatever they start), as a Unix
socket with mode 0600 would. Where /proc/net/tcp does not exist (not Linux) no owner can be
told, and connections are served as before.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

_TABLES: dict[int, Path] = {socket.AF_INET: Path("/proc/net/tcp"), socket.AF_INET6: Path("/proc/net/tcp6")}


def _hex_address(family: int, host: str, port: int) -> str:
    """An address as /proc/net/tcp writes it: the IP's 32-bit words in host order, then the port."""
    packed = socket.inet_pton(family, host)
    words = struct.unpack(f"={len(packed) // 4}I", packed)
    return "".join(f"{word:08X}" for word in words) + f":{port:04X}"


def socket_owner(family: int, client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid that owns the client's socket of the connection client -> server; None if the table
    cannot be read or holds no such socket."""
    table = _TABLES.get(family)
    if table is None:
        return None
    local, remote = _hex_address(family, *client[:2]), _hex_address(family, *server[:2])
    try:
        with table.open(encoding="ascii") as lines:
            next(lines, None)  # the header
            for line in lines:
                fields = line.split()
                if len(fields) > 7 and fields[1] == local and fields[2] == remote:
                    return int(fields[7])
    except (OSError, ValueError):
        return None
    return None


def peer_allowed(family: int, client: tuple[str, int], server: tuple[str, int], uid: int) -> bool:
    """Whether the connection's client runs as `uid` (always True where sockets have no known owner)."""
    table = _TABLES.get(family)
    if table is None or not table.exists():
        return True
    return socket_owner(family, client, server) == uid
