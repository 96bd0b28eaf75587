"""An object's bytes between the store's files and a client's connection, as cheaply as the connection allows.

The endpoint's throughput is what a trainer's input pipeline waits on, so the bytes take the
shortest way each connection has:

- to a plain connection (clients given `STORAGE_EMULATOR_HOST`, `gcloud storage`), `sendfile`:
  the kernel copies the file's pages to the socket, nothing passes through Python;
- to a TLS connection (TensorFlow and gsutil, through the proxy), one buffer reused for the whole
  range, filled by `preadv` and encrypted from there (no new object per block);
- from a client (uploads), blocks read from the connection in one C call each, written to the
  upload's file and hashed as they pass (`ContentHashes`).
"""

from __future__ import annotations

import io
import os
import socket
import ssl
from collections.abc import Iterator
from typing import BinaryIO

# Big enough that a 64 MiB object costs a few dozen Python-level steps, small enough to stay in
# the CPU's caches between the file read and the encryption that follows it.
BLOCK = 1024 * 1024


def send_range(connection: socket.socket, stream: BinaryIO, start: int, length: int) -> None:
    """Send `length` bytes of `stream` from `start`; ConnectionResetError if the file ends before."""
    if length <= 0:
        return
    if not isinstance(connection, ssl.SSLSocket):
        if connection.sendfile(stream, start, length) != length:
            raise ConnectionResetError("the object shrank while it was read")
        return
    buffer = memoryview(bytearray(min(BLOCK, length)))
    descriptor, offset, end = stream.fileno(), start, start + length
    while offset < end:
        got = os.preadv(descriptor, [buffer[:min(len(buffer), end - offset)]], offset)
        if not got:
            raise ConnectionResetError("the object shrank while it was read")
        connection.sendall(buffer[:got])
        offset += got


def body_blocks(rfile: io.BufferedIOBase, headers_length: str | None, chunked: bool) -> Iterator[bytes]:
    """A request body's bytes, in blocks of at most `BLOCK`: `Transfer-Encoding: chunked`, or
    `Content-Length` bytes (none without one). ConnectionResetError if the client stops early."""
    if chunked:
        while True:
            size = int(rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return
            yield from _exactly(rfile, size)
            rfile.readline()
    yield from _exactly(rfile, int(headers_length or 0))


def _exactly(rfile: io.BufferedIOBase, length: int) -> Iterator[bytes]:
    remaining = length
    while remaining > 0:
        block = rfile.read(min(remaining, BLOCK))
        if not block:
            raise ConnectionResetError("the request body ended early")
        remaining -= len(block)
        yield block
