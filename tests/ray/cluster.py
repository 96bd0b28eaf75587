"""A real two-node Ray cluster on this machine, for tests and benchmarks.

Both nodes run `ray start --block` in the foreground of a process we own, with their own ports
and a private temp dir, so stopping them is a signal to two PIDs: nobody else's Ray is touched.
Nodes get logical CPUs and memory (`--num-cpus`, `--memory`) so that machine-type bundles fit
on a 2-core machine, and a resource naming the node (`node_head`, `node_second`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
RAY = str(VENV_BIN / "ray")


def _free_ports(count: int) -> list[int]:
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


def node_environment() -> dict[str, str]:
    """What the nodes (and so the replicas) run with: this venv first on PATH, quiet single-threaded TF."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "AIPTRAIN_"))}
    env.update(
        PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        TF_CPP_MIN_LOG_LEVEL="2",
        OMP_NUM_THREADS="1",
        TF_NUM_INTRAOP_THREADS="1",
        RAY_USAGE_STATS_ENABLED="0",
        RAY_DEDUP_LOGS="0",
    )
    return env


@dataclass
class RayCluster:
    address: str  # the Jobs API (dashboard) URL
    gcs_address: str
    temp_dir: Path
    nodes: list[subprocess.Popen[bytes]]

    def stop(self) -> None:
        """SIGTERM each `ray start --block` (it stops its node's processes), SIGKILL if it hangs."""
        for node in reversed(self.nodes):
            if node.poll() is None:
                node.send_signal(signal.SIGTERM)
        for node in reversed(self.nodes):
            try:
                node.wait(60)
            except subprocess.TimeoutExpired:
                node.kill()
                node.wait()


def _node_ports() -> list[str]:
    (manager, objects, agent_http, agent_grpc, metrics, runtime_env) = _free_ports(6)
    low = _free_ports(1)[0]
    return [
        "--node-manager-port", str(manager), "--object-manager-port", str(objects),
        "--dashboard-agent-listen-port", str(agent_http), "--dashboard-agent-grpc-port", str(agent_grpc),
        "--metrics-export-port", str(metrics), "--runtime-env-agent-port", str(runtime_env),
        "--min-worker-port", str(20000 + low % 20000), "--max-worker-port", str(20000 + low % 20000 + 99),
    ]


def _wait_for(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"ray start exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5) as answer:
            if answer.status == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(f"{url} did not answer within {timeout} s:\n{log.read_text()[-3000:]}")


def _count_nodes(gcs_address: str, env: dict[str, str]) -> int:
    out = subprocess.run([str(VENV_BIN / "python"), "-c",
                          "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR');"
                          "print(sum(1 for n in ray.nodes() if n['Alive']))", gcs_address],
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def start_cluster(temp_dir: Path, *, cpus_per_node: int = 4, memory_per_node: float = 16e9) -> RayCluster:
    """Head + second node; returns once both are up. The caller must call `stop()`."""
    temp_dir.mkdir(parents=True, exist_ok=True)
    env = node_environment()
    gcs_port, dashboard_port, client_port = _free_ports(3)
    common = ["--block", "--node-ip-address", "127.0.0.1", "--num-cpus", str(cpus_per_node), "--num-gpus", "0",
              "--memory", str(int(memory_per_node)), "--object-store-memory", str(200 * 1024 * 1024),
              "--disable-usage-stats"]
    head_log = temp_dir / "head.log"
    head = subprocess.Popen(
        [RAY, "start", "--head", "--port", str(gcs_port), "--dashboard-host", "127.0.0.1",
         "--dashboard-port", str(dashboard_port), "--ray-client-server-port", str(client_port),
         "--include-dashboard", "true", "--temp-dir", str(temp_dir / "ray"),
         "--resources", '{"node_head": 1}', *common, *_node_ports()],
        env=env, stdout=head_log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    cluster = RayCluster(f"http://127.0.0.1:{dashboard_port}", f"127.0.0.1:{gcs_port}", temp_dir, [head])
    try:
        _wait_for(f"{cluster.address}/api/version", head, head_log)
        second_log = temp_dir / "second.log"
        second = subprocess.Popen(
            [RAY, "start", "--address", cluster.gcs_address, "--resources", '{"node_second": 1}',
             *common, *_node_ports()],
            env=env, stdout=second_log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
        )
        cluster.nodes.append(second)
        deadline = time.monotonic() + 180
        while _count_nodes(cluster.gcs_address, env) < 2:
            if second.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the second node did not join:\n{second_log.read_text()[-3000:]}")
            time.sleep(1)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextlib.contextmanager
def running_cluster(temp_dir: Path, **sizes: float) -> Iterator[RayCluster]:
    cluster = start_cluster(temp_dir, **sizes)  # type: ignore[arg-type]
    try:
        yield cluster
    finally:
        cluster.stop()
