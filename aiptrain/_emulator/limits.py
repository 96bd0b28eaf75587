"""What one client may cost the emulator: body size, JSON depth, and how long it may dawdle.

Google's front end refuses oversized bodies with 400 `Request payload size exceeds the limit` and
parses JSON strictly (no `NaN`, no nesting beyond 100 levels); clients that trickle bytes are cut
off. The emulator does the same with uvicorn's and Starlette's own mechanisms:

- the body is read from the ASGI stream and refused as soon as it passes `MAX_BODY_BYTES` (a
  `Content-Length` above the limit is refused before a byte is read), so no request holds more;
- the whole body must arrive within `BODY_TIMEOUT_SECONDS`, the request line and headers within
  `HEAD_TIMEOUT_SECONDS` of the connection opening (or of the previous response), whatever the
  trickle rate; uvicorn's own keep-alive timeout closes idle connections, its
  `h11_max_incomplete_event_size` caps the headers, and `limit_concurrency` the connections;
- the gRPC port (`grpc_api`) takes no message above `MAX_BODY_BYTES` either (gRPC's own limit, 4
  MB, let a 3.9 MB job in that every ListCustomJobs answer then carried), serves at most
  `MAX_GRPC_CALLS` calls at once (the rest are refused with RESOURCE_EXHAUSTED at once, before
  their messages are read), and at most `MAX_GRPC_STREAMS` calls per connection are in flight.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from starlette.requests import Request
from uvicorn.protocols.http.h11_impl import H11Protocol

from aiptrain._emulator.errors import ApiError
from aiptrain._submit.nesting import MAX_DEPTH, nesting_problem

MAX_BODY_BYTES = 1024 * 1024  # a Job or CustomJob is a few KB; 1 MiB leaves room for long args
MAX_JSON_DEPTH = MAX_DEPTH
BODY_TIMEOUT_SECONDS = 30.0
HEAD_TIMEOUT_SECONDS = 30.0
KEEP_ALIVE_SECONDS = 5
MAX_HEADER_BYTES = 64 * 1024
MAX_CONNECTIONS = 100
# Calls the gRPC port serves at once (its handlers run on GRPC_WORKERS threads; the others wait),
# and calls in flight on one connection (HTTP/2's concurrent streams).
GRPC_WORKERS = 8
MAX_GRPC_CALLS = 32
MAX_GRPC_STREAMS = 16

# Keyword arguments for uvicorn.Config that carry the limits above.
UVICORN_LIMITS: dict[str, Any] = {
    "timeout_keep_alive": KEEP_ALIVE_SECONDS,
    "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
    "limit_concurrency": MAX_CONNECTIONS,
}


# Options for grpc.server that carry the limits above.
GRPC_SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_receive_message_length", MAX_BODY_BYTES),
    ("grpc.max_concurrent_streams", MAX_GRPC_STREAMS),
)


def _invalid_json(reason: str) -> ApiError:
    return ApiError("INVALID_ARGUMENT", f"Invalid JSON payload received. {reason}")


def too_large() -> ApiError:
    return ApiError("INVALID_ARGUMENT", f"Request payload size exceeds the limit: {MAX_BODY_BYTES} bytes.")


async def read_capped_body(request: Request) -> bytes:
    """The request body, refused past MAX_BODY_BYTES or BODY_TIMEOUT_SECONDS."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_large()
    chunks: list[bytes] = []
    size = 0

    async def collect() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise too_large()
            chunks.append(chunk)

    try:
        await asyncio.wait_for(collect(), BODY_TIMEOUT_SECONDS)
    except TimeoutError:
        raise ApiError("DEADLINE_EXCEEDED", f"The request body did not arrive within {BODY_TIMEOUT_SECONDS:g} "
                       "seconds.") from None
    return b"".join(chunks)


def _refuse_constant(name: str) -> Any:
    raise _invalid_json(f"{name} is not a JSON value; numbers must be finite.")


def _finite_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):  # 1e999 overflows to infinity
        raise _invalid_json(f"{text[:40]} is out of range for a number.")
    return number


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all different: a second `jobId` or `workerCount` would otherwise
    win silently, and what a proxy or a log shows would not be what runs."""
    value: dict[str, Any] = {}
    for key, item in pairs:
        if key in value:
            raise _invalid_json(f"The key {key[:100]!r} appears twice in one object.")
        value[key] = item
    return value


def parse_json_body(raw: bytes) -> Any:
    """Strict JSON: UTF-8, no NaN/Infinity literals, no key twice in an object, nested at most
    MAX_JSON_DEPTH levels."""
    if not raw.strip():
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid_json("The body is not UTF-8.") from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float,
                           object_pairs_hook=_unique_keys)
    except RecursionError:
        raise _invalid_json(f"The body is nested deeper than {MAX_JSON_DEPTH} levels.") from None
    except ValueError:
        raise _invalid_json("The body is not JSON.") from None
    problem = nesting_problem(value, max_depth=MAX_JSON_DEPTH)
    if problem:
        raise _invalid_json(f"The body cannot be processed: {problem}.")
    return value


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for the request line and headers.

    uvicorn resets its keep-alive timer on every byte received, so a client sending one byte a
    second would keep a connection forever; this deadline runs from the connection (or the
    previous response) to the end of the headers, however the bytes trickle in.
    """

    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not None and not self.cycle.response_complete:
            self._disarm_head_deadline()  # the headers are in: the app's body timeout takes over

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)

    def _arm_head_deadline(self) -> None:
        self._disarm_head_deadline()
        self._head_deadline = self.loop.call_later(HEAD_TIMEOUT_SECONDS, self._head_timed_out)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_timed_out(self) -> None:
        self._head_deadline = None
        waiting_for_head = self.cycle is None or self.cycle.response_complete
        if waiting_for_head and not self.transport.is_closing():
            self.transport.close()
