"""What each replica's container runs, and the engine's command line that creates it. Pure, so
`--dry-run` shows exactly what a local run would create.

The command follows the service:

- a replica type with `containerCommand` or `containerArgs` runs them by Kubernetes' rules:
  command only -> that command, no args (the image's ENTRYPOINT and CMD ignored); args only ->
  the image's ENTRYPOINT with those args; both -> command + args;
- otherwise the image's ENTRYPOINT gets the job's `args` (what follows `--`) and then
  `--job-dir DIR` (ml v1 jobs; Vertex AI hands the directory over only through AIP_*); with
  neither, the image runs as it is (ENTRYPOINT and CMD);
- a tuning trial's parameters follow as flags, whichever of these applies.

On the engine's command line a command becomes `--entrypoint FIRST IMAGE REST...` (Docker resets
the image's CMD when the entrypoint is given), args become what follows the image.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aiptrain.job.catalog import Catalog
from aiptrain.job.cluster import ReplicaGroup
from aiptrain.job.spec import ROLE, TrainingInput

# Every replica listens here on its own hostname, as on the service (Google's Horovod wrapper
# refuses mixed ports).
REPLICA_PORT = 2222



@dataclass(frozen=True)
class ContainerCommand:
    """An image and, by Kubernetes' rules, what replaces its ENTRYPOINT and CMD (None: the image's)."""

    image: str
    command: tuple[str, ...] | None = None
    args: tuple[str, ...] | None = None

    def engine_arguments(self) -> list[str]:
        """What follows the options of `docker create`: `[--entrypoint X] IMAGE ARGS...`."""
        if self.command:
            return [f"--entrypoint={self.command[0]}", self.image, *self.command[1:], *(self.args or ())]
        return [self.image, *(self.args or ())]

    def describe(self) -> str:
        return shlex.join(self.engine_arguments())


def container_command(
    training_input: TrainingInput, group: ReplicaGroup, *, args: Sequence[str], job_dir: str | None,
    job_dir_argument: bool, extra_args: Sequence[str] = (),
) -> ContainerCommand:
    """What the replicas of `group` run (see the module's rules); `args` are the job's (its
    `trainingInput.args`, or those rewritten to local paths)."""
    assert group.image_uri is not None
    config = ROLE[group.role].config(training_input)
    if config is not None and (config.container_command or config.container_args is not None):
        command = tuple(config.container_command) if config.container_command else None
        given = [*(config.container_args or ()), *extra_args]
        return ContainerCommand(group.image_uri, command, tuple(given) if given else None)
    given = [*args, *extra_args]
    if job_dir and job_dir_argument:
        given += ["--job-dir", job_dir]
    return ContainerCommand(group.image_uri, None, tuple(given) if given else None)


@dataclass(frozen=True)
class ContainerLimits:
    """A replica's share of the machine as the engine enforces it."""

    cpus: float | None = None  # --cpus
    cpuset: tuple[int, ...] = ()  # --cpuset-cpus
    memory_bytes: int | None = None  # --memory
    gpus: tuple[int, ...] = ()  # device requests, by the host's GPU index

    def engine_options(self, engine_kind: str) -> list[str]:
        options: list[str] = []
        if self.cpus:
            options += ["--cpus", f"{self.cpus:g}"]
        if self.cpuset:
            options += ["--cpuset-cpus", ",".join(str(core) for core in self.cpuset)]
        if self.memory_bytes:
            options += ["--memory", f"{self.memory_bytes // 1024**2}m"]
        if self.gpus and engine_kind == "podman":
            for index in self.gpus:  # the Container Device Interface's names
                options += ["--device", f"nvidia.com/gpu={index}"]
        elif self.gpus:
            # A device request, as `--gpus` makes it (the engine's CSV syntax needs the quotes).
            options += ["--gpus", '"device=' + ",".join(str(index) for index in self.gpus) + '"']
        return options


def machine_limits(
    group: ReplicaGroup, catalog: Catalog, *, cores: int, memory_bytes: int | None,
    threads: int | None = None, pinned: Sequence[int] = (), gpus: Sequence[int] = (),
) -> ContainerLimits:
    """The limits of one replica of `group`: its share's cores (else its machine type's vCPUs),
    its machine type's memory, both within what this machine has, and its share's GPUs."""
    machine = catalog.machine_types.get(group.machine_type or "")
    vcpus = threads or (machine.vcpus if machine is not None else 0)
    cpus = float(min(vcpus, cores)) if vcpus else None
    memory = int(machine.memory_gb * 1024**3) if machine is not None and machine.memory_gb else None
    if memory is not None and memory_bytes is not None:
        memory = min(memory, memory_bytes)
    return ContainerLimits(cpus=cpus, cpuset=tuple(pinned), memory_bytes=memory, gpus=tuple(gpus))


@dataclass(frozen=True)
class ContainerNames:
    """The names of one replica set's network and containers, unique on the engine (from its token)."""

    prefix: str  # aiptrain-<first 12 of the job's run token>-<run or trial id>

    @classmethod
    def for_run(cls, run_token: str) -> ContainerNames:
        job, _, rest = run_token.partition("/")
        tail = "".join(c if c.isalnum() or c in "_.-" else "-" for c in rest.replace("/", "-")) or "run"
        return cls(f"aiptrain-{job[:12]}-{tail}")

    @property
    def network(self) -> str:
        return self.prefix

    def replica(self, task_name: str) -> str:
        return f"{self.prefix}-{task_name}"

    def network_owner(self, task_name: str) -> str:
        return f"{self.prefix}-{task_name}-net"


def replica_create_arguments(
    *, engine_kind: str, name: str, network: str, command: ContainerCommand, limits: ContainerLimits,
    label_options: Sequence[str], env_file: str, mounts: Mapping[str, str], pull: bool,
    extra_options: Sequence[str] = (),
) -> list[str]:
    """`create ...` for a replica: on `network` (its network owner's namespace, `container:OWNER`,
    which gives it its hostname, address and relays; or `host` on a Ray node), with `--init` (so
    SIGTERM reaches the trainer and zombies are reaped, as for a process replica), its limits, its
    variables from `env_file` and its mounts (host path -> container path, read-only unless the
    container path ends in `:rw`)."""
    options = ["create", "--pull", "missing" if pull else "never", "--init", "--name", name,
               "--network", network, *label_options, *limits.engine_options(engine_kind),
               "--env-file", env_file]
    for host, inside in mounts.items():
        target, _, mode = inside.partition(":")
        options += ["--volume", f"{host}:{target}:{mode or 'ro'}"]
    return [*options, *extra_options, *command.engine_arguments()]
