"""A real two-node Ray cluster on this machine, for tests and benchmarks.

Both nodes run `ray start --block` in the foreground of a process we own, with their own ports
and a private temp dir, so stopping them is a signal to two PIDs: nobody else's Ray is touched.
Nodes get logical CPUs and memory (`--num-cpus`, `--memory`) so that machine-type bundles fit
on a 2-core machine, and a resource naming the node (`node_head`, `node_second`).

The nodes run a small virtualenv of their own that adds this venv's site-packages (`_node_python`):
the same packages (Ray, uv, TensorFlow for AIPTRAIN_RAY_RUNTIME_PACKAGES=cluster) at the cost of a
few kilobytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

VENV_BIN = Path(sys.executable).parent


def _free_ports(count: int) -> list[int]:
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


def _node_python(temp_dir: Path) -> Path:
    """A virtualenv without packages of its own whose site-packages adds this venv's (with their .pth files)."""
    venv = temp_dir / "py"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site_packages = next(path for path in sys.path if path.startswith(sys.prefix) and path.endswith("site-packages"))
    target = next((venv / "lib").glob("python*")) / "site-packages" / "aiptrain_test_node.pth"
    target.write_text(f"import site; site.addsitedir({site_packages!r})\n")
    return venv / "bin" / "python"


def node_environment(bin_dir: Path = VENV_BIN) -> dict[str, str]:
    """What the nodes (and so the replicas) run with: their Python first on PATH, quiet single-threaded TF."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "AIPTRAIN_"))}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        TF_CPP_MIN_LOG_LEVEL="2",
        OMP_NUM_THREADS="1",
        TF_NUM_INTRAOP_THREADS="1",
        RAY_USAGE_STATS_ENABLED="0",
        RAY_DEDUP_LOGS="0",
        # A node that stops answering is declared dead within seconds, not half a minute.
        RAY_health_check_initial_delay_ms="1000",
        RAY_health_check_period_ms="1000",
        RAY_health_check_timeout_ms="3000",
        RAY_health_check_failure_threshold="5",
        # A node registers with the head within 30 s by default; with TensorFlow tests on the other
        # xdist worker a second node once took longer, and `ray start` gave up.
        RAY_raylet_start_wait_time_s="120",
    )
    return env


@dataclass
class RayCluster:
    address: str  # the Jobs API (dashboard) URL
    gcs_address: str
    temp_dir: Path
    nodes: list[subprocess.Popen[bytes]]
    # Each node's AIPTRAIN_RAY_CACHE_DIR (head, second): its runtime environments, as on two machines.
    cache_dirs: tuple[Path, Path] = (Path(), Path())

    def crash_node(self, index: int) -> None:
        """SIGKILL every process of a node at once (its process group), as when its machine dies."""
        node = self.nodes[index]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.pid, signal.SIGKILL)
        node.wait(60)

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


# Worker ports come in slots of 100 between 20000 and 32767, below the kernel's ephemeral range
# (32768 and up), where every other port of a node is picked: a slot can never hold one of them
# (Ray refuses to start a node whose worker range does), and the nodes' slots differ.
_WORKER_PORTS_BASE, _WORKER_PORT_SLOTS = 20000, 127


def _node_ports(worker_slot: int) -> list[str]:
    (manager, objects, agent_http, agent_grpc, metrics, runtime_env) = _free_ports(6)
    low = _WORKER_PORTS_BASE + worker_slot % _WORKER_PORT_SLOTS * 100
    return [
        "--node-manager-port", str(manager), "--object-manager-port", str(objects),
        "--dashboard-agent-listen-port", str(agent_http), "--dashboard-agent-grpc-port", str(agent_grpc),
        "--metrics-export-port", str(metrics), "--runtime-env-agent-port", str(runtime_env),
        "--min-worker-port", str(low), "--max-worker-port", str(low + 99),
    ]


def _check_alive(process: subprocess.Popen[bytes], log: Path) -> None:
    if process.poll() is not None:
        raise RuntimeError(f"ray start exited with {process.returncode}:\n{log.read_text()[-3000:]}")


def _wait_for(ready: Callable[[], bool], what: str, process: subprocess.Popen[bytes], log: Path,
              timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _check_alive(process, log)
        with contextlib.suppress(OSError):
            if ready():
                return
        time.sleep(0.25)
    raise RuntimeError(f"{what} within {timeout} s:\n{log.read_text()[-3000:]}")


def _port_open(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        return True


def _alive_nodes(address: str) -> int:
    """Nodes the cluster reports ALIVE, through the state API of its dashboard (no Ray client)."""
    with urllib.request.urlopen(f"{address}/api/v0/nodes?limit=100", timeout=10) as answer:
        nodes = json.load(answer)["data"]["result"]["result"]
    return sum(1 for node in nodes if node.get("state") == "ALIVE")


def start_cluster(temp_dir: Path, *, cpus_per_node: int = 4, memory_per_node: float = 16e9,
                  resources: dict[str, float] | None = None, env: dict[str, str] | None = None) -> RayCluster:
    """Head + second node; returns once both are up. The caller must call `stop()`; a cluster that
    fails to start is stopped here and `temp_dir` removed.

    The second node starts as soon as the head's GCS answers, while the head's dashboard is still
    starting. Each node has its own temp dir and its own cache of runtime environments
    (AIPTRAIN_RAY_CACHE_DIR), as on separate machines. `resources` are offered by both nodes on top
    of their own, `env` is added to both nodes' environment."""
    temp_dir.mkdir(parents=True, exist_ok=True)
    python = _node_python(temp_dir)
    cache_dirs = (temp_dir / "cache-head", temp_dir / "cache-second")
    env = {**node_environment(python.parent), "AIPTRAIN_RAY_CACHE_DIR": str(cache_dirs[0]), **(env or {})}
    ray = [str(python), "-c", "import sys; from ray.scripts.scripts import main; sys.argv[0] = 'ray'; main()"]
    gcs_port, dashboard_port, client_port, worker_slot = _free_ports(4)
    common = ["--block", "--node-ip-address", "127.0.0.1", "--num-cpus", str(cpus_per_node), "--num-gpus", "0",
              "--memory", str(int(memory_per_node)), "--object-store-memory", str(200 * 1024 * 1024),
              "--disable-usage-stats"]
    head_log = temp_dir / "head.log"
    head = subprocess.Popen(
        [*ray, "start", "--head", "--port", str(gcs_port), "--dashboard-host", "127.0.0.1",
         "--dashboard-port", str(dashboard_port), "--ray-client-server-port", str(client_port),
         "--include-dashboard", "true", "--temp-dir", str(temp_dir / "ray"),
         "--resources", json.dumps({"node_head": 1, **(resources or {})}), *common, *_node_ports(worker_slot)],
        env=env, stdout=head_log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    cluster = RayCluster(f"http://127.0.0.1:{dashboard_port}", f"127.0.0.1:{gcs_port}", temp_dir, [head], cache_dirs)
    try:
        _wait_for(lambda: _port_open(gcs_port), "the head's GCS did not answer", head, head_log)
        second_log = temp_dir / "second.log"
        second = subprocess.Popen(
            [*ray, "start", "--address", cluster.gcs_address,
             "--resources", json.dumps({"node_second": 1, **(resources or {})}),
             "--temp-dir", str(temp_dir / "ray2"), *common, *_node_ports(worker_slot + 1)],
            env={**env, "AIPTRAIN_RAY_CACHE_DIR": str(cache_dirs[1])}, stdout=second_log.open("wb"),
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        cluster.nodes.append(second)
        def both_up() -> bool:
            _check_alive(second, second_log)  # a second node that failed to start says why at once
            return _alive_nodes(cluster.address) >= 2

        _wait_for(both_up, "the two nodes were not up", head, head_log)
    except BaseException:
        cluster.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)  # the error carries the logs' tails
        raise
    return cluster


@contextlib.contextmanager
def running_cluster(temp_dir: Path, **sizes: float) -> Iterator[RayCluster]:
    cluster = start_cluster(temp_dir, **sizes)  # type: ignore[arg-type]
    try:
        yield cluster
    finally:
        cluster.stop()
