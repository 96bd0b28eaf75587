"""One replica set's containers: its network, a network owner per replica, the replicas.

`ContainerLauncher` is a `ReplicaLauncher`: the replica set starts, stops and sweeps container
replicas as it does processes, so restarts, the primary's end and cancel follow the same rules.

- **Network.** Each set gets a network of its own; each replica gets a *network owner*, a small
  container named after it (`--hostname` and `--network-alias` its task name) whose network
  namespace the replica joins. Every replica is thus its own host on one port (2222), as on the
  service, and the owner keeps the address while the replica restarts. The owner runs the relays
  to the job's host-side endpoints (`endpoints`): they listen on 127.0.0.1 inside the namespace
  before the replica starts. On Podman, whose networks program the host's firewall and turn IP
  forwarding on, the replicas share one owner without a network (`--network none`) and listen on
  consecutive ports of its loopback instead.
- **Replica.** Created once with `--init` (SIGTERM reaches the trainer; zombies are reaped), its
  share of the machine (`--cpus`, `--cpuset-cpus`, `--memory`, GPU device requests, `--pids-limit`),
  no log copy in the engine (`--log-driver none`: its output is attached), its
  variables (from a 0600 file, removed once the container exists) and its labels; started with
  `start --attach`, whose stdout and stderr are the replica's pipes and whose exit status is the
  container's. A restart starts the same container again (same hostname, same disk, as a VM
  restart). Stopping is the engine's `stop` (SIGTERM, SIGKILL after the grace period).
- **End.** `close` removes every container and the network carrying the set's label; the job's
  label is what the reaper sweeps after a supervisor that died (`cleanup`). An engine that went
  away mid-job (its daemon killed) ends each replica's `start --attach` in error: the replica's
  end then names the engine (`ContainerProcess.exit_reason`), and what could not be removed is
  noted and removed when the engine answers again (`cleanup`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from aiptrain._replicas.command import ReplicaCommand
from aiptrain._replicas.containers.command import (
    REPLICA_PORT,
    ContainerCommand,
    ContainerLimits,
    ContainerNames,
    bind_mount,
    pids_limit,
    replica_create_arguments,
)
from aiptrain._replicas.containers.container_engine import (
    ContainerEngine,
    EngineCallFailed,
    engine_answers,
    engine_message,
)
from aiptrain._replicas.containers.endpoints import (
    SOCKETS_INSIDE,
    HostEndpoint,
    HostRelays,
    container_environment,
)
from aiptrain._replicas.containers.labels import RUN_LABEL, labels
from aiptrain._replicas.containers.relay_image import ensure_relay_image
from aiptrain._replicas.containers.relay_program import READY
from aiptrain._replicas.containers.trust import extended_bundle
from aiptrain._replicas.processes import TOKEN_VARIABLE, ManagedProcess, kill_tokened_processes, process_start_ticks
from aiptrain._replicas.replica_set import ReplicaProcess
from aiptrain._replicas.scratch import CONTAINERS_PREFIX, make_scratch

# The cloudml-hypertune file of a tuning trial: its directory is shared with the container at the
# library's default place, and the variable names the file there.
_METRIC_FILE_VARIABLE = "CLOUD_ML_HP_METRIC_FILE"
_METRIC_DIR_INSIDE = "/tmp/hypertune"  # noqa: S108 - the path inside the container, as on the service
_OWNER_READY_SECONDS = 60.0
# ContainerEngine calls made side by side (creating a set's network owners).
_PARALLEL_CALLS = 4
# Variables of the replica set that concern this machine's processes, not a container.
_HOST_ONLY = (TOKEN_VARIABLE, "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
_NO_PROXY_VARIABLES = ("NO_PROXY", "no_proxy", "no_grpc_proxy")


@dataclass(frozen=True)
class ReplicaContainer:
    """What one replica runs and the share it gets."""

    task_name: str
    command: ContainerCommand
    limits: ContainerLimits = field(default_factory=ContainerLimits)


@dataclass(frozen=True)
class ImageFacts:
    image: str
    id: str
    environment: tuple[str, ...]  # its ENV, NAME=VALUE


@dataclass
class ContainerProcess(ManagedProcess):
    """A replica's `start --attach`: its pipes are the container's output, its status the container's,
    unless the engine went away under it: then the status is the command line's own, and
    `exit_reason` says what happened instead."""

    container: str = ""
    engine: ContainerEngine | None = None
    engine_lost: bool = False
    _asked: bool = field(default=False, repr=False)

    def reap(self) -> int:
        returncode = super().reap()
        # An exit of its own (not a stop's SIGTERM or SIGKILL, 128 + N): was it the engine's?
        if 0 < returncode < 128 and self.engine is not None and not self._asked:
            self._asked = True  # asked once: reap runs again from other threads
            self.engine_lost = not engine_answers(self.engine)
        return returncode

    def exit_reason(self, returncode: int) -> str | None:
        """How the replica ended, when its status does not say it (its engine went away)."""
        if not self.engine_lost or self.engine is None:
            return None
        name = self.engine.name
        return (f"lost its container engine: {name} stopped answering while it ran (its command line ended "
                f"with status {returncode}, and the container was left unread); what the job created on "
                f"{name} is removed once it answers again")


class ContainerSetupFailed(EngineCallFailed):
    """The set's network, owners or containers could not be made."""


class ContainerLauncher:
    """Runs one replica set's replicas as containers of `engine` (see the module)."""

    def __init__(
        self,
        engine: ContainerEngine,
        replicas: Sequence[ReplicaContainer],
        *,
        job_token: str,
        run_token: str,
        endpoints: Sequence[HostEndpoint] = (),
        mounts: Mapping[str, str] | None = None,
        pull: bool = False,
        say: Callable[[str], None] | None = None,
        host_network: bool = False,
        trust_cache: Path | None = None,
        scratch_record: Path | None = None,
    ) -> None:
        self.engine = engine
        self.replicas = {replica.task_name: replica for replica in replicas}
        self.job_token = job_token
        self.run_token = run_token
        self.endpoints = list(endpoints)
        self.mounts = dict(mounts or {})
        self.pull = pull
        self.say = say or (lambda _line: None)
        self.names = ContainerNames.for_run(run_token)
        # Podman: one owner without a network for the whole set (see the module).
        self.shared_namespace = engine.is_podman
        # A Ray node's replica: the node's own network, no owner (its endpoints are the node's).
        self.host_network = host_network
        # Where images' system bundles extended with the endpoints' CA are kept (`trust`); None: not made.
        self.trust_cache = trust_cache
        self._trust: dict[str, tuple[Path, str]] = {}  # image -> (extended bundle here, its path inside)
        self.images: dict[str, ImageFacts] = {}
        self._relays: HostRelays | None = None
        # Each network owner's `start --attach` (its first line says its relays listen), and those heard.
        self._owners: dict[str, subprocess.Popen[bytes]] = {}
        self._ready: set[str] = set()
        self._created: set[str] = set()
        self._network = False
        # Its environment files and the relays' sockets (`scratch`): named in `scratch_record` (the
        # job's files), if given, for whoever cleans up after a killed owner.
        self.workspace = make_scratch(CONTAINERS_PREFIX, scratch_record)
        self._lock = threading.Lock()

    # -- addresses ------------------------------------------------------------------------------

    def hostname(self, task_name: str) -> str:
        return "localhost" if self.shared_namespace else task_name

    def address(self, task_name: str) -> str:
        """Where the replica listens, as its TF_CONFIG names it."""
        if not self.shared_namespace:
            return f"{task_name}:{REPLICA_PORT}"
        return f"localhost:{REPLICA_PORT + list(self.replicas).index(task_name)}"

    def addresses(self, tasks: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
        """TF_CONFIG task type -> addresses, for (task type, task name) pairs in index order."""
        found: dict[str, list[str]] = {}
        for task_type, task_name in tasks:
            found.setdefault(task_type, []).append(self.address(task_name))
        return found

    # -- setting up -----------------------------------------------------------------------------

    def open(self) -> None:
        """Check the images, then make the network, the relays and every replica's network owner
        (started here; a replica's start waits until its owner's relays listen)."""
        try:
            for image in dict.fromkeys(replica.command.image for replica in self.replicas.values()):
                self.images[image] = self._image_facts(image)
            if self.host_network:
                return  # a Ray node's replica: its guard removes what it leaves (`cleanup.RemovalGuard`)
            self._sweep_leftovers()
            self._extend_trust()
            relay_image = ensure_relay_image(self.engine)
            if self.endpoints:
                self._relays = HostRelays(self.endpoints, self.workspace)
            if not self.shared_namespace:
                self.engine.run(["network", "create", *labels(self.job_token, self.run_token), self.names.network])
                self._network = True
            owners = list(dict.fromkeys(self._owner_of(task) for task in self.replicas))
            self._start_owners(relay_image, owners)
        except (EngineCallFailed, OSError) as error:
            self.close()
            message = error.message if isinstance(error, EngineCallFailed) else str(error)
            raise ContainerSetupFailed(message) from None

    def _sweep_leftovers(self) -> None:
        """What jobs that ended while this engine was away left on it (it answers now)."""
        from aiptrain._replicas.containers.cleanup import sweep_leftovers

        sweep_leftovers(self.engine)

    def _extend_trust(self) -> None:
        """Each image's system bundle with the endpoints' CA added (for TensorFlow before 2.4)."""
        certificates = [path for endpoint in self.endpoints for path in endpoint.trusted]
        if not certificates or self.trust_cache is None:
            return
        for index, facts in enumerate(self.images.values()):
            made = extended_bundle(self.engine, facts.image, facts.id, certificates, self.trust_cache,
                                   f"{self.names.prefix}-trust-{index}", labels(self.job_token, self.run_token))
            if made is not None:
                self._trust[facts.image] = made

    def _image_facts(self, image: str) -> ImageFacts:
        found = self.engine.run(["image", "inspect", "--", image], check=False)
        if found.returncode != 0 and self.pull:
            self.say(f"Pulling {image} ({self.engine.name}; AIPTRAIN_CONTAINER_PULL=missing).")
            self.engine.run(["pull", "--", image], timeout=3600)
            found = self.engine.run(["image", "inspect", "--", image])
        if found.returncode != 0:
            raise EngineCallFailed(f"the image {image} is not on this machine's {self.engine.name} "
                                   f"({engine_message(found.stderr)})")
        facts = json.loads(found.stdout)[0]
        config = facts.get("Config") or {}
        return ImageFacts(image, str(facts.get("Id", "")), tuple(config.get("Env") or ()))

    def _start_owners(self, relay_image: str, owners: list[str]) -> None:
        relays = [endpoint.relay_argument() for endpoint in self.endpoints]
        volume = (["--mount", bind_mount(str(self._relays.directory), SOCKETS_INSIDE, read_only=True)]
                  if self._relays else [])
        def create(owner: str) -> None:
            task = owner.removeprefix(self.names.prefix + "-").removesuffix("-net")
            network = (["--network", "none"] if self.shared_namespace else
                       ["--network", self.names.network, "--hostname", task, "--network-alias", task])
            self.engine.run(["create", "--pull", "never", "--name", owner, *network,
                             *labels(self.job_token, self.run_token, task, "network-owner"),
                             *self.engine.create_options(), *volume, "--", relay_image, *relays])
            with self._lock:
                self._created.add(owner)

        with ThreadPoolExecutor(max_workers=min(len(owners), _PARALLEL_CALLS)) as pool:
            for created in [pool.submit(create, owner) for owner in owners]:
                created.result()
        # Started together, not waited for: each `start --attach` says `ready` once its relays listen,
        # which a replica's start waits for (its container is created meanwhile).
        for owner in owners:
            self._owners[owner] = subprocess.Popen(
                [self.engine.binary, "start", "--attach", owner], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=self.engine.process_environment(), start_new_session=True)

    def _await_owner(self, owner: str) -> None:
        """Return once the network owner's relays listen; EngineCallFailed if it did not start."""
        client = self._owners[owner]
        if owner in self._ready:
            return
        assert client.stdout is not None
        line = _read_line(client.stdout, _OWNER_READY_SECONDS)
        if line.strip() != READY:
            error = b""
            if client.poll() is not None and client.stderr is not None:
                error = client.stderr.read()
            raise EngineCallFailed(f"the network owner {owner} did not start: "
                                   f"{engine_message(error) if error else line.strip() or 'no answer'}")
        self._ready.add(owner)

    # -- ReplicaLauncher ------------------------------------------------------------------------

    def start(self, task_name: str, command: ReplicaCommand, env: dict[str, str], cwd: Path) -> ReplicaProcess:
        """Start the replica's container (created the first time, running `command`); `cwd` is
        ignored: a container runs in its WORKDIR."""
        del cwd
        if not isinstance(command, ContainerCommand):
            raise TypeError(f"{task_name} runs a Python module: its replica set needs a process launcher")
        name = self.names.replica(task_name)
        with self._lock:
            if name not in self._created:
                # A Ray replica's launcher knew only its image until now.
                self.replicas[task_name] = dataclasses.replace(self.replicas[task_name], command=command)
                self._create(task_name, env)
                self._created.add(name)
        try:
            if not self.host_network:
                self._await_owner(self._owner_of(task_name))
        except EngineCallFailed as error:
            raise OSError(error.message) from None
        token = env.get(TOKEN_VARIABLE, self.run_token)
        popen = subprocess.Popen([self.engine.binary, "start", "--attach", name], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                 env=self.engine.process_environment({TOKEN_VARIABLE: token}))
        return ContainerProcess(popen, process_start_ticks(popen.pid), container=name, engine=self.engine)

    def _owner_of(self, task_name: str) -> str:
        return self.names.network_owner("set" if self.shared_namespace else task_name)

    def _create(self, task_name: str, env: Mapping[str, str]) -> None:
        replica = self.replicas[task_name]
        variables, mounts = self.container_variables(replica, env)
        env_file = self.workspace / f"{task_name}.env"
        descriptor = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as file:
            for name, value in variables.items():
                if "\n" in value:
                    raise OSError(f"the variable {name} of {task_name} holds a line break, which "
                                  f"{self.engine.name}'s environment files cannot carry")
                file.write(f"{name}={value}\n")
        owner = self._owner_of(task_name)
        limits = replica.limits
        if limits.pids is None:  # a Ray replica's limits come from its request: its vCPUs set the ceiling
            limits = dataclasses.replace(limits, pids=pids_limit(math.ceil(limits.cpus) if limits.cpus else None))
        share = " ".join(limits.engine_options(self.engine.kind)) or "no limits"
        self.say(f"Creating the container of {task_name} ({self.names.replica(task_name)}): {share}.")
        _make_missing_sources(mounts)
        try:
            self.engine.run(replica_create_arguments(
                engine_kind=self.engine.kind, name=self.names.replica(task_name),
                network="host" if self.host_network else f"container:{owner}",
                command=replica.command, limits=limits,
                label_options=labels(self.job_token, self.run_token, task_name, "replica"),
                env_file=str(env_file), mounts=mounts, pull=False, extra_options=self.engine.create_options(),
            ))
        except EngineCallFailed as error:
            raise OSError(error.message) from None
        finally:
            env_file.unlink(missing_ok=True)

    def container_variables(
        self, replica: ReplicaContainer, env: Mapping[str, str],
    ) -> tuple[dict[str, str], dict[str, str]]:
        """(variables, host path -> path inside) of a replica's container: the endpoints' and the
        set's (TF_CONFIG, CLUSTER_SPEC, CLOUD_ML_*, AIP_*, thread counts), never this host's own."""
        variables, mounts = container_environment(self.endpoints)
        variables.update({name: value for name, value in env.items() if name not in _HOST_ONLY})
        peers = [self.hostname(task) for task in self.replicas]
        for name in _NO_PROXY_VARIABLES:
            if name in variables:  # the cluster's own traffic never goes through the storage proxy
                variables[name] = ",".join(dict.fromkeys([*variables[name].split(","), *peers]))
        metric_file = variables.get(_METRIC_FILE_VARIABLE)
        if metric_file:
            path = Path(metric_file)
            mounts[str(path.parent)] = f"{_METRIC_DIR_INSIDE}:rw"
            variables[_METRIC_FILE_VARIABLE] = f"{_METRIC_DIR_INSIDE}/{path.name}"
        if replica.command.image in self._trust:
            bundle, inside = self._trust[replica.command.image]
            mounts[str(bundle)] = inside
        image_env = self.images[replica.command.image].environment if replica.command.image in self.images else ()
        if any(entry.startswith("PYTHONUNBUFFERED=") for entry in image_env):
            variables.pop("PYTHONUNBUFFERED", None)  # the image's own setting stands
        mounts.update(self.mounts)
        return variables, mounts

    def stop(self, processes: list[ReplicaProcess], grace: float) -> None:
        """The engine's stop (SIGTERM, SIGKILL after `grace` s) for every container, then reap."""
        running = [p for p in processes if isinstance(p, ContainerProcess) and not p.has_exited()]
        if running:
            seconds = max(0, math.ceil(grace))
            self.engine.run(["stop", "--time", str(seconds), *[p.container for p in running]],
                            timeout=seconds + 60, check=False)
        for process in processes:
            if isinstance(process, ContainerProcess):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.popen.wait(timeout=10)  # its last lines come through before the client goes
                process.reap()

    def sweep(self, token: str) -> None:
        """The command-line clients carrying `token` (a container whose client is gone is removed,
        running or not, when the set closes)."""
        kill_tokened_processes(token)

    # -- the end --------------------------------------------------------------------------------

    def close(self) -> None:
        """Remove every container and the network of the set, and the relays; idempotent."""
        from aiptrain._replicas.containers.cleanup import remove_labelled, removed_or_noted

        removed = True
        if self._created:
            done = self.engine.run(["rm", "--force", "--volumes", *sorted(self._created)], check=False, timeout=300)
            if done.returncode != 0:  # whatever was not removed by name goes by the set's label
                removed = remove_labelled(self.engine, f"{RUN_LABEL}={self.run_token}")
            self._created.clear()
        if self._network:
            removed = self.engine.run(["network", "rm", self.names.network], check=False).returncode == 0 and removed
            self._network = False
        removed_or_noted(self.engine, f"{RUN_LABEL}={self.run_token}", removed)
        for client in self._owners.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                client.wait(timeout=10)
            for stream in (client.stdout, client.stderr):
                if stream is not None:
                    stream.close()
        self._owners.clear()
        self._ready.clear()
        if self._relays is not None:
            self._relays.close()
            self._relays = None
        shutil.rmtree(self.workspace, ignore_errors=True)

    def __enter__(self) -> ContainerLauncher:
        self.open()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def notes(self) -> list[str]:
        """Each replica's image and its id, and its container's name (what `jobs describe` shows)."""
        lines = []
        for task, replica in self.replicas.items():
            facts = self.images.get(replica.command.image)
            identity = f" ({facts.id})" if facts is not None and facts.id else ""
            lines.append(f"{task}: image {replica.command.image}{identity}, container {self.names.replica(task)} "
                         f"on {self.engine.name}")
        return lines


def _make_missing_sources(mounts: Mapping[str, str]) -> None:
    """A bind mount's source that is not there yet becomes a directory, as `--volume` made it:
    `--mount` refuses a missing source, and a job's storage (a Ray node's shared `gs://`, a fresh
    home's) may not exist before its first replica writes to it."""
    for host in mounts:
        if not os.path.lexists(host):
            Path(host).mkdir(parents=True, exist_ok=True)


def _read_line(stream: object, seconds: float) -> str:
    """The first line of a pipe, or what came before `seconds` passed."""
    result: list[bytes] = []
    reader = threading.Thread(target=lambda: result.append(stream.readline()), daemon=True)  # type: ignore[attr-defined]
    reader.start()
    reader.join(seconds)
    return result[0].decode(errors="replace") if result else ""
