"""A fake-gcs-server whose every request passes a byte-counting TCP relay.

Counting at the TCP level sees what really crosses the wire (headers, bodies, retries), with no
HTTP parsing that could hide anything. Resumable uploads continue at the URL the server hands
out in its Location header, so the server is started with `-external-url` set to the relay's
address: every later request of the session comes back through the relay too.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.fixtures.gcs import FakeGcsServer, find_fake_gcs_binary, free_port

_READY_TIMEOUT = 15.0
_BLOCK = 256 * 1024


class CountingRelay:
    """Forwards loopback connections to `upstream_port`, counting the bytes clients send."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._upstream_port: int | None = None
        self._sent = 0
        self._lock = threading.Lock()
        self._closed = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, upstream_port: int) -> None:
        self._upstream_port = upstream_port
        threading.Thread(target=self._accept_loop, name="counting-relay", daemon=True).start()

    def sent_bytes(self) -> int:
        """Bytes received from clients (and forwarded upstream) since the last `reset`."""
        with self._lock:
            return self._sent

    def reset(self) -> None:
        with self._lock:
            self._sent = 0

    def close(self) -> None:
        self._closed.set()
        self._listener.close()

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            assert self._upstream_port is not None
            try:
                upstream = socket.create_connection(("127.0.0.1", self._upstream_port))
            except OSError:
                client.close()  # the server is not listening yet: the client sees a reset and retries
                continue
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, counted: bool) -> None:
        try:
            while block := source.recv(_BLOCK):
                if counted:
                    with self._lock:
                        self._sent += len(block)
                target.sendall(block)
        except OSError:
            pass
        finally:
            # Half-close so the other direction can finish its answer, then let go of both.
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)
            with contextlib.suppress(OSError):
                source.close()


@contextlib.contextmanager
def counted_fake_gcs() -> Iterator[tuple[FakeGcsServer, CountingRelay]]:
    """An in-memory fake-gcs-server reachable only through a CountingRelay (its `endpoint`)."""
    relay = CountingRelay()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="fake-gcs-counted-") as workdir:
        log_path = Path(workdir) / "fake-gcs.log"
        command = [str(find_fake_gcs_binary()), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
                   "-external-url", relay.url, "-backend", "memory", "-log-level", "warn"]
        with log_path.open("wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        server = FakeGcsServer(endpoint=relay.url, process=process, log_path=log_path)
        try:
            relay.start(port)
            _wait_ready(server)
            yield server, relay
        finally:
            server.stop()
            relay.close()


def _wait_ready(server: FakeGcsServer) -> None:
    deadline = time.monotonic() + _READY_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{server.endpoint}/storage/v1/b", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("fake-gcs-server did not start: " + server.log_path.read_text(errors="replace")[-2000:])
