"""Whose process is on the other end of a loopback connection to the storage endpoint.

The endpoint serves the job's `gs://` from files under a 0700 AIPTRAIN_HOME; on 127.0.0.1 any
user of the machine could otherwise connect and read, write or delete them. A per-request secret
would not do: google-cloud-storage pointed at an emulator (STORAGE_EMULATOR_HOST), gcsfs and
`gcloud storage` with credentials disabled send no credential at all. The kernel knows who owns
each socket, though, and the endpoint serves only connections whose client socket belongs to its
own user (the job's replicas and whatever they start), as a Unix socket with mode 0600 would.

It asks the kernel for that one socket (netlink `sock_diag`, what `ss` uses): a lookup by
address, whatever the number of sockets on the machine. TensorFlow opens a connection for every
request and each closed one lingers in TIME_WAIT, so reading the whole table (/proc/net/tcp,
the fallback where netlink is refused) cost more the longer a job ran. Where neither exists (not
Linux) no owner can be told, and connections are served as before.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from pathlib import Path

_TABLES: dict[int, Path] = {socket.AF_INET: Path("/proc/net/tcp"), socket.AF_INET6: Path("/proc/net/tcp6")}

# linux/netlink.h, linux/sock_diag.h, linux/inet_diag.h
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NO_COOKIE = 0xFFFFFFFF
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port id
_REQUEST = struct.Struct("=BBBBI")  # inet_diag_req_v2 up to its socket id: family, protocol, ext, pad, states
_MESSAGE_UID = struct.Struct("=I")  # inet_diag_msg.idiag_uid, after 4 bytes, the 48-byte id and 3 words
_UID_OFFSET = _HEADER.size + 4 + 48 + 12


def _socket_id(family: int, local: tuple[str, int], remote: tuple[str, int]) -> bytes:
    """inet_diag_sockid: ports and addresses in network order, no interface, any cookie."""
    def address(host: str) -> bytes:
        return socket.inet_pton(family, host).ljust(16, b"\0")
    return (struct.pack("!HH", local[1], remote[1]) + address(local[0]) + address(remote[0])
            + struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE))


def _owner_by_netlink(family: int, client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid of the TCP socket client -> server, asked of the kernel; None if it cannot say."""
    body = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + _socket_id(family, client, server)
    request = _HEADER.pack(_HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0) + body
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as diag:
            diag.settimeout(2)
            diag.sendto(request, (0, 0))
            answer = diag.recv(8192)
    except OSError:
        return None
    if len(answer) < _UID_OFFSET + _MESSAGE_UID.size:
        return None
    _length, kind, _flags, _sequence, _port = _HEADER.unpack_from(answer)
    if kind != _SOCK_DIAG_BY_FAMILY:
        return None  # _NLMSG_ERROR: no such socket, or the kernel would not say
    (uid,) = _MESSAGE_UID.unpack_from(answer, _UID_OFFSET)
    return int(uid)


def _hex_address(family: int, host: str, port: int) -> str:
    """An address as /proc/net/tcp writes it: the IP's 32-bit words in host order, then the port."""
    packed = socket.inet_pton(family, host)
    words = struct.unpack(f"={len(packed) // 4}I", packed)
    return "".join(f"{word:08X}" for word in words) + f":{port:04X}"


def _owner_by_table(family: int, client: tuple[str, int], server: tuple[str, int]) -> int | None:
    table = _TABLES.get(family)
    if table is None:
        return None
    needle = f" {_hex_address(family, *client[:2])} {_hex_address(family, *server[:2])} ".encode()
    with contextlib.suppress(OSError, ValueError):
        content = table.read_bytes()
        found = content.find(needle)
        if found >= 0:
            line = content[found:content.find(b"\n", found)]
            return int(line.split()[7])
    return None


def socket_owner(family: int, client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid that owns the client's socket of the connection client -> server; None if the kernel
    cannot be asked or knows no such socket."""
    client, server = (client[0], int(client[1])), (server[0], int(server[1]))
    owner = _owner_by_netlink(family, client, server)
    return owner if owner is not None else _owner_by_table(family, client, server)


def peer_allowed(family: int, client: tuple[str, int], server: tuple[str, int], uid: int) -> bool:
    """Whether the connection's client runs as `uid` (always True where sockets have no known owner)."""
    table = _TABLES.get(family)
    if table is None or not table.exists():
        return True
    return socket_owner(family, client, server) == uid


def served_peer(server_address: tuple[object, ...], client: tuple[str, int], uid: int) -> bool:
    """`peer_allowed` for a connection accepted by a TCP server of 127.0.0.1 at `server_address`."""
    host, port = server_address[:2]
    return peer_allowed(socket.AF_INET, client, (str(host), int(str(port))), uid)
