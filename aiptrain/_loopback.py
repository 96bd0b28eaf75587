"""Whether a host or an endpoint is this machine's loopback: one answer for every caller.

The emulator binds without a token only there, its guard accepts only those `Host` headers
(or the address it was told to bind), and the REST clients send an emulator's token instead of
Google credentials, and no proxy, only there. A name counts only when no resolver is involved:
`localhost` (in any case, with or without the root's trailing dot) and loopback IP literals
(127.0.0.0/8, ::1, and 127.0.0.0/8 mapped into IPv6). `*.localhost` and names that happen to
resolve to 127.0.0.1 do not: where they go is up to a resolver, and a token must not follow.
`0.0.0.0` and `::` are every interface, not loopback.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

_LOCALHOST = ("localhost", "localhost.")


def is_loopback_host(host: str) -> bool:
    """`host` is a name or an IP literal, bare or in brackets (`[::1]`), without a port."""
    name = host.lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name in _LOCALHOST:
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return (mapped or address).is_loopback


def is_loopback_url(url: str) -> bool:
    """`url` is an endpoint (`http://127.0.0.1:8080/`); its host decides."""
    try:
        host = urlsplit(url).hostname
    except ValueError:  # a malformed IPv6 literal or port
        return False
    return host is not None and is_loopback_host(host)
