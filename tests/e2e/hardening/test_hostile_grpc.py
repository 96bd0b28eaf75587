"""Hostile calls to the gRPC port of `aiptrain local serve` (the real server process, on loopback,
spoken to by grpcio's own client with raw bytes, as an attacker's client would).

The port checks the token before it parses a message, takes no message larger than REST's body
limit (`emulator/limits.py`), and serves a bounded number of calls at once: a crowd of
unauthenticated oversized calls costs the server a bounded amount of memory, however many there are.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import pytest

from aiptrain._emulator import limits
from tests.fixtures.emulator import Emulator, running_emulator

grpc = pytest.importorskip("grpc")
pytest.importorskip("google.cloud.aiplatform_v1")

PARENT = "projects/hostile-grpc/locations/us-central1"
CREATE = "/google.cloud.aiplatform.v1.JobService/CreateCustomJob"
LIST = "/google.cloud.aiplatform.v1.JobService/ListCustomJobs"
# What the crowd sent: just under gRPC's default 4 MB message limit.
LARGE = 3_900_000
CROWD = 96
# The server holds at most MAX_GRPC_CALLS calls at once (the rest are refused unread), so at most
# that many messages (124 MB on a loaded machine, where every admitted call is still in flight),
# plus slack: far below what the crowd would cost if each call's message were held (CROWD * LARGE,
# 374 MB).
MEMORY_BUDGET = limits.MAX_GRPC_CALLS * LARGE + 32 * 1024**2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    with running_emulator(tmp_path_factory.mktemp("grpc-home"), grpc=True) as emulator:
        yield emulator


def _channel(server: Emulator) -> Any:
    address, certificate = server.grpc
    credentials = grpc.ssl_channel_credentials(root_certificates=certificate.read_bytes())
    return grpc.secure_channel(address, credentials, options=[("grpc.max_send_message_length", 8 * 1024**2),
                                                              ("grpc.max_receive_message_length", 8 * 1024**2)])


def _bearer(server: Emulator) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {server.token}")]


def _list_request(filter_text: str) -> bytes:
    from google.cloud import aiplatform_v1

    message = aiplatform_v1.ListCustomJobsRequest(parent=PARENT, filter=filter_text)
    return bytes(aiplatform_v1.ListCustomJobsRequest.serialize(message))


def _status(call: Any) -> Any:
    try:
        call()
    except grpc.RpcError as error:
        return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


def _peak_memory(pid: int) -> int:
    """The process's resident high-water mark (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc")


def test_an_unauthenticated_call_is_refused_before_its_message_is_parsed(server: Emulator) -> None:
    """Bytes that are no protobuf at all get UNAUTHENTICATED, not a parse error: the token comes first."""
    with _channel(server) as channel:
        garbage = b"\xff" * 64
        code, _ = _status(lambda: channel.unary_unary(CREATE)(garbage, timeout=30))
        assert code == grpc.StatusCode.UNAUTHENTICATED
        code, _ = _status(lambda: channel.unary_unary(CREATE)(garbage, timeout=30,
                                                           metadata=[("authorization", "Bearer wrong")]))
        assert code == grpc.StatusCode.UNAUTHENTICATED


def test_a_message_over_rests_body_limit_is_refused(server: Emulator) -> None:
    with _channel(server) as channel:
        listed = channel.unary_unary(LIST)
        code, _ = _status(lambda: listed(_list_request(""), timeout=30, metadata=_bearer(server)))
        assert code == grpc.StatusCode.OK  # the token and a small message are served
        oversized = _list_request("x" * (limits.MAX_BODY_BYTES + 1))
        code, details = _status(lambda: listed(oversized, timeout=30, metadata=_bearer(server)))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, details
        assert str(limits.MAX_BODY_BYTES) in details


def test_a_crowd_of_unauthenticated_large_calls_keeps_the_servers_memory_bounded(server: Emulator) -> None:
    before = _peak_memory(server.process.pid)
    payload = b"\x0a" + b"\x00" * (LARGE - 1)
    codes: set[Any] = set()
    with _channel(server) as channel, futures.ThreadPoolExecutor(max_workers=CROWD) as pool:
        create = channel.unary_unary(CREATE)
        calls = [pool.submit(_status, lambda: create(payload, timeout=120)) for _ in range(CROWD)]
        for call in calls:
            codes.add(call.result()[0])
    grown = _peak_memory(server.process.pid) - before
    assert grown < MEMORY_BUDGET, f"the server grew by {grown // 1024**2} MB for {CROWD} refused calls"
    assert codes <= {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.RESOURCE_EXHAUSTED}, codes
    with _channel(server) as channel:  # and it still serves its own client
        code, _ = _status(lambda: channel.unary_unary(LIST)(_list_request(""), timeout=30,
                                                            metadata=_bearer(server)))
        assert code == grpc.StatusCode.OK
