"""Loopback addresses for a cluster: free ports probed by binding to port 0, never a fixed block."""

from __future__ import annotations

import contextlib
import socket

from aiptrain._job.cluster import ReplicaGroup

HOST = "localhost"


def free_ports(count: int) -> list[int]:
    """`count` distinct ports that were free a moment ago (all probed before any is released)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def free_addresses(groups: list[ReplicaGroup]) -> dict[str, list[str]]:
    """Task type -> `localhost:PORT` per replica, for every group (evaluators too, for CLUSTER_SPEC)."""
    ports = iter(free_ports(sum(group.count for group in groups)))
    return {group.task_type: [f"{HOST}:{next(ports)}" for _ in range(group.count)] for group in groups}


def consecutive_addresses(groups: list[ReplicaGroup], start_port: int) -> dict[str, list[str]]:
    """gcloud's `--start-port` layout: primary, then parameter servers, then workers, in a row.

    Evaluators (never in TF_CONFIG's cluster) get the ports after those, for CLUSTER_SPEC.
    """
    order = {"master": 0, "parameter_server": 1, "worker": 2, "evaluator": 3}
    port = start_port
    addresses: dict[str, list[str]] = {}
    for group in sorted((g for g in groups if g.role in order), key=lambda g: order[g.role]):
        addresses[group.task_type] = [f"{HOST}:{port + i}" for i in range(group.count)]
        port += group.count
    return addresses
