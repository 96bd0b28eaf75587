"""The launcher on the suite's Docker daemon, below a job: what the engine is really given."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest

from aiptrain._replicas.containers.command import ContainerCommand, ContainerLimits
from aiptrain._replicas.containers.container_engine import find_engine
from aiptrain._replicas.containers.endpoints import HostEndpoint
from aiptrain._replicas.containers.launcher import ContainerLauncher, ReplicaContainer
from aiptrain._replicas.processes import ManagedProcess
from aiptrain._replicas.scratch import CONTAINERS_PREFIX
from tests.fixtures.containers import SuiteDocker, SuiteImages
from tests.fixtures.emulator import REPO
from tests.fixtures.engine import wait_until

pytestmark = pytest.mark.containers


def test_gpus_become_device_requests_of_the_container(docker: SuiteDocker, images: SuiteImages,
                                                       tmp_path: Path) -> None:
    replica = ReplicaContainer("master-replica-0", ContainerCommand(images["shell"], None, ("echo hi",)),
                               ContainerLimits(cpus=1.0, gpus=(0, 1)))
    launcher = ContainerLauncher(find_engine(), [replica], job_token="gputest", run_token="gputest/run")
    with launcher:
        process = launcher.start("master-replica-0", replica.command, {}, tmp_path)
        assert isinstance(process, ManagedProcess)
        process.popen.wait(timeout=120)
        returncode = process.reap()
        assert returncode != 0  # no GPU runtime here: the engine refuses to start it
        assert b"could not select device driver" in process.stderr.read()
        requests = json.loads(docker.output("inspect", "--format", "{{json .HostConfig.DeviceRequests}}",
                                            launcher.names.replica("master-replica-0")))
        assert requests == [{"Driver": "", "Count": 0, "DeviceIDs": ["0", "1"], "Capabilities": [["gpu"]],
                             "Options": {}}]
    assert docker.output("ps", "--all", "--filter", "label=aiptrain.job=gputest", "--quiet") == ""


def test_a_host_endpoint_is_reached_at_its_own_address_through_the_relay(
    docker: SuiteDocker, images: SuiteImages, tmp_path: Path,
) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]

    def answer() -> None:
        client, _ = server.accept()
        client.sendall(b"from the host: " + client.recv(100))
        client.close()

    threading.Thread(target=answer, daemon=True).start()
    endpoint = HostEndpoint("probe", "127.0.0.1", port, {"PROBE_AT": f"127.0.0.1:{port}"})
    script = "echo $(hostname) | nc 127.0.0.1 ${PROBE_AT##*:}"
    replica = ReplicaContainer("master-replica-0", ContainerCommand(images["shell"], None, (script,)))
    launcher = ContainerLauncher(find_engine(), [replica], job_token="relaytest", run_token="relaytest/run",
                                 endpoints=[endpoint])
    with launcher:
        output = run_to_success(launcher, replica, tmp_path)
        assert output.decode().strip() == "from the host: master-replica-0"
    server.close()


def test_a_launcher_s_scratch_holds_its_relays_and_goes_with_it(docker: SuiteDocker, images: SuiteImages) -> None:
    endpoint = HostEndpoint("probe", "127.0.0.1", 9, {})
    replica = ReplicaContainer("master-replica-0", ContainerCommand(images["shell"], None, ("true",)))
    launcher = ContainerLauncher(find_engine(), [replica], job_token="scratchtest", run_token="scratchtest/run",
                                 endpoints=[endpoint])
    assert launcher.workspace.name.startswith(CONTAINERS_PREFIX)
    with launcher:
        assert (launcher.workspace / "relays" / "probe.sock").exists()
    assert not launcher.workspace.exists()


# An owner no reaper watches (as a Ray replica's actor): its guard, then nothing until it is killed.
GUARDED_OWNER = textwrap.dedent('''
    import json, sys, time
    from pathlib import Path
    from aiptrain._replicas.containers.cleanup import RemovalGuard
    from aiptrain._replicas.containers.container_engine import ContainerEngine

    RemovalGuard(ContainerEngine.from_json(json.loads(sys.argv[1])), sys.argv[2], [Path(sys.argv[3])])
    print("guarded", flush=True)
    time.sleep(600)
''')


def test_the_guard_of_an_owner_killed_with_sigkill_removes_its_containers_and_scratch(
    docker: SuiteDocker, images: SuiteImages,
) -> None:
    label = "aiptrain.run=guardtest/run"
    docker.output("create", "--label", label, "--label", "aiptrain.job=guardtest", images["shell"], "true")
    scratch = Path(tempfile.mkdtemp(prefix=CONTAINERS_PREFIX))
    (scratch / "relays").mkdir()
    owner = subprocess.Popen([sys.executable, "-c", GUARDED_OWNER, json.dumps(find_engine().to_json()), label,
                              str(scratch)], stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert owner.stdout is not None and owner.stdout.readline() == b"guarded\n"
        owner.kill()
    finally:
        owner.wait()
    wait_until(lambda: not scratch.exists(), 60, "the guard to remove the scratch directory")
    assert docker.output("ps", "--all", "--filter", f"label={label}", "--quiet") == ""


def test_a_replica_keeps_no_engine_log_has_a_process_limit_and_mounts_a_path_with_a_colon(
    docker: SuiteDocker, images: SuiteImages, tmp_path: Path,
) -> None:
    """What an AIPTRAIN_HOME holding `:` gives a replica's mounts, what its output costs the
    engine (nothing: it is attached, not logged), and the ceiling on its processes."""
    shared = tmp_path / "home:with:colons" / "data"
    shared.mkdir(parents=True)
    (shared / "f").write_text("through the colon\n")
    script = ("cat /data/f; cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max; "
              "seq 1 2000 | while read n; do echo line $n; done >/dev/null")
    replica = ReplicaContainer("master-replica-0", ContainerCommand(images["shell"], None, (script,)),
                               ContainerLimits(cpus=1.0))  # as a Ray replica's: no ceiling given, one by its vCPUs
    launcher = ContainerLauncher(find_engine(), [replica], job_token="mounttest", run_token="mounttest/run",
                                 mounts={str(shared): "/data"})
    with launcher:
        output = run_to_success(launcher, replica, tmp_path)
        assert output.decode().split() == ["through", "the", "colon", "2048"]
        name = launcher.names.replica("master-replica-0")
        host = json.loads(docker.output("inspect", "--format", "{{json .HostConfig}}", name))
        assert (host["LogConfig"]["Type"], host["PidsLimit"]) == ("none", 2048)


def test_a_mount_whose_source_is_missing_gets_it_as_a_directory(docker: SuiteDocker, images: SuiteImages,
                                                                   tmp_path: Path) -> None:
    """A Ray node's shared storage is not there before the job's first write: its replicas' mounts
    make it, as `--volume` did, instead of the engine refusing the container."""
    storage = tmp_path / "home" / "storage"
    replica = ReplicaContainer("master-replica-0", ContainerCommand(images["shell"], None, ("echo ok > /out/f",)),
                               ContainerLimits(cpus=1.0))
    launcher = ContainerLauncher(find_engine(), [replica], job_token="missingsrc", run_token="missingsrc/run",
                                 mounts={str(storage): "/out:rw"})
    with launcher:
        run_to_success(launcher, replica, tmp_path)
    assert (storage / "f").read_text() == "ok\n"


def run_to_success(launcher: ContainerLauncher, replica: ReplicaContainer, cwd: Path) -> bytes:
    """Start the replica's container, wait for it to exit 0 (its stderr otherwise), and return its stdout."""
    process = launcher.start(replica.task_name, replica.command, {}, cwd)
    assert isinstance(process, ManagedProcess)
    output, errors = process.popen.communicate(timeout=120)
    assert process.reap() == 0, errors
    return output
