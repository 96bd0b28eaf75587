"""Byte relays between a TCP listener and a Unix socket, in both directions. Standard library only:
it is also the program of the relay container (`python -I -S relay_program.py LISTEN=TARGET ...`),
which runs it from an image holding nothing but the interpreter and the modules it loads.

In the container, each `127.0.0.1:PORT=/run/aiptrain/endpoints/NAME.sock` listens on PORT inside
the replica's network namespace and forwards every connection to the job's Unix socket; on the
host, `serve_unix_to_tcp` takes that socket's connections to the real server on 127.0.0.1. It
prints `ready` once every listener is bound, and exits on SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable

READY = "ready"
_CHUNK = 256 * 1024


def _copy(source: socket.socket, target: socket.socket) -> None:
    """Copy until `source` ends, then tell `target` nothing more comes (half-close)."""
    try:
        while True:
            data = source.recv(_CHUNK)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)


def relay(client: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """Join `client` to a new connection to the target, until both directions ended."""
    try:
        upstream = connect()
    except OSError:
        client.close()
        return
    back = threading.Thread(target=_copy, args=(upstream, client), daemon=True)
    back.start()
    _copy(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(listener: socket.socket, connect: Callable[[], socket.socket], stop: threading.Event | None = None) -> None:
    """Accept on `listener` until it is closed (or `stop` is set), relaying each connection."""
    while stop is None or not stop.is_set():
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=relay, args=(client, connect), daemon=True).start()


def unix_connector(path: str) -> Callable[[], socket.socket]:
    def connect() -> socket.socket:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(path)
        except OSError:
            connection.close()
            raise
        return connection
    return connect


def tcp_connector(host: str, port: int) -> Callable[[], socket.socket]:
    def connect() -> socket.socket:
        connection = socket.create_connection((host, port))
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection
    return connect


def tcp_listener(host: str, port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(128)
    return listener


def main(argv: list[str]) -> int:
    """The relay container: listen on each `HOST:PORT`, forward to its `=SOCKET`."""
    if argv == ["--modules"]:  # which files the relay image must hold
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if path:
                print(os.path.abspath(path))
        return 0
    signal.signal(signal.SIGTERM, lambda _signum, _frame: os._exit(0))
    threads = []
    for spec in argv:
        address, _, path = spec.partition("=")
        host, _, port = address.rpartition(":")
        listener = tcp_listener(host, int(port))
        threads.append(threading.Thread(target=serve, args=(listener, unix_connector(path)), daemon=True))
    for thread in threads:
        thread.start()
    print(READY, flush=True)
    while True:  # the network namespace lives as long as this process: until SIGTERM or SIGKILL
        signal.pause()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
