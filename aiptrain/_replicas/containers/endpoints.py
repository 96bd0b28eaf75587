"""The job's host-side servers, as containers reach them.

A job runs servers on this machine's loopback for its replicas (its storage endpoint; its
metadata server): each is a `HostEndpoint` (a name, its 127.0.0.1 address, the variables that
point clients at it, the host files those variables name). A container cannot reach the host's
loopback, and a server bound where containers could reach it would serve every container and
every local user. So each endpoint gets a Unix socket in a directory of mode 0700
(`HostRelays`), relayed to the server; the directory is mounted only into the job's network
owners, whose relay listens on the same 127.0.0.1 port inside the replica's network namespace.
The replica then finds each endpoint at the very address a process replica is given, and its
variables stay as they are, but for the files they name, which are mounted into the container.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aiptrain._replicas.containers.relay_program import serve, tcp_connector

# Where the network owner finds the sockets, and where a replica finds the endpoints' files.
SOCKETS_INSIDE = "/run/aiptrain/endpoints"
FILES_INSIDE = "/run/aiptrain/files"


@dataclass(frozen=True)
class HostEndpoint:
    name: str  # a file name: storage, metadata
    host: str  # 127.0.0.1
    port: int
    environment: Mapping[str, str] = field(default_factory=dict)
    # The host files the variables name (a CA bundle): mounted into the container, the variables
    # that name them changed to the mounted path.
    files: Sequence[Path] = ()
    # CA certificates clients must trust to reach it: added to the image's own system bundle, for
    # clients that read only that (TensorFlow before 2.4).
    trusted: Sequence[Path] = ()

    def relay_argument(self) -> str:
        """The network owner's relay argument: listen on the same port, forward to the socket."""
        return f"127.0.0.1:{self.port}={SOCKETS_INSIDE}/{self.name}.sock"


def container_environment(endpoints: Sequence[HostEndpoint]) -> tuple[dict[str, str], dict[str, str]]:
    """(variables for a container, host file -> its path inside) for `endpoints`."""
    env: dict[str, str] = {}
    mounts: dict[str, str] = {}
    for endpoint in endpoints:
        inside = {str(path): f"{FILES_INSIDE}/{endpoint.name}-{path.name}" for path in endpoint.files}
        mounts.update(inside)
        for name, value in endpoint.environment.items():
            env[name] = inside.get(value, value)
    return env, mounts


class HostRelays:
    """A Unix socket per endpoint in a new private directory (0700) made in `parent` (the set's
    scratch directory, short enough for a socket's path whatever AIPTRAIN_HOME is), each
    connection relayed to its server."""

    def __init__(self, endpoints: Sequence[HostEndpoint], parent: Path) -> None:
        self.directory = parent / "relays"
        self.directory.mkdir(mode=0o700)
        directory = self.directory
        self._listeners: list[socket.socket] = []
        self._stop = threading.Event()
        try:
            for endpoint in endpoints:
                path = directory / f"{endpoint.name}.sock"
                path.unlink(missing_ok=True)
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self._listeners.append(listener)
                listener.bind(str(path))
                os.chmod(path, 0o600)
                listener.listen(128)
                threading.Thread(target=serve, args=(listener, tcp_connector(endpoint.host, endpoint.port), self._stop),
                                 name=f"relay-{endpoint.name}", daemon=True).start()
        except OSError:
            self.close()
            raise

    def close(self) -> None:
        self._stop.set()
        for listener in self._listeners:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        self._listeners.clear()
        shutil.rmtree(self.directory, ignore_errors=True)
