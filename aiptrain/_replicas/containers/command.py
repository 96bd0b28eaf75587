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
the image's CMD when the entrypoint is given), args become what follows the image; `--` goes before
the image, so no image name or argument is ever read as an option of the engine.

A replica is created without the engine's own copy of its output (`--log-driver none`: the output
reaches the job through `start --attach`, and a copy would double the disk a chatty job uses,
without a cap), with its host directories as `--mount`s (a path holding `:`, as an AIPTRAIN_HOME
may, breaks `--volume HOST:INSIDE:MODE`), and with a ceiling on its processes and threads by its
machine type (`pids_limit`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aiptrain._job.catalog import Catalog
from aiptrain._job.cluster import ReplicaGroup
from aiptrain._job.spec import ROLE, TrainingInput

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
        return [*self.engine_options(), *self.positional_arguments()]

    def engine_options(self) -> list[str]:
        """`--entrypoint X` when a command replaces the image's ENTRYPOINT."""
        return [f"--entrypoint={self.command[0]}"] if self.command else []

    def positional_arguments(self) -> list[str]:
        """`IMAGE ARGS...`: what follows `--` on the engine's command line."""
        if self.command:
            return [self.image, *self.command[1:], *(self.args or ())]
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


# The processes and threads one replica may hold (`--pids-limit`; the kernel's pids controller
# counts threads too), by its machine type's vCPUs: room for TensorFlow's thread pools (a few
# hundred threads a process on a big machine) and data-loader workers, none for a fork bomb. The
# floor is Podman's own default; a machine type the catalog does not know gets the default.
PIDS_PER_VCPU = 512
PIDS_FLOOR = 2048
PIDS_CEILING = 65536
PIDS_DEFAULT = 4096


def pids_limit(vcpus: int | None) -> int:
    """The process ceiling of a replica whose machine type has `vcpus` (None: not known)."""
    if not vcpus:
        return PIDS_DEFAULT
    return max(PIDS_FLOOR, min(PIDS_CEILING, PIDS_PER_VCPU * vcpus))


@dataclass(frozen=True)
class ContainerLimits:
    """A replica's share of the machine as the engine enforces it."""

    cpus: float | None = None  # --cpus
    cpuset: tuple[int, ...] = ()  # --cpuset-cpus
    memory_bytes: int | None = None  # --memory
    gpus: tuple[int, ...] = ()  # device requests, by the host's GPU index
    pids: int | None = None  # --pids-limit

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
        if self.pids:
            options += ["--pids-limit", str(self.pids)]
        return options


def machine_limits(
    group: ReplicaGroup, catalog: Catalog, *, cores: int, memory_bytes: int | None,
    threads: int | None = None, pinned: Sequence[int] = (), gpus: Sequence[int] = (),
) -> ContainerLimits:
    """The limits of one replica of `group`: its share's cores (else its machine type's vCPUs),
    its machine type's memory, both within what this machine has, its share's GPUs, and the
    process ceiling of its machine type."""
    machine = catalog.machine_types.get(group.machine_type or "")
    vcpus = threads or (machine.vcpus if machine is not None else 0)
    cpus = float(min(vcpus, cores)) if vcpus else None
    memory = int(machine.memory_gb * 1024**3) if machine is not None and machine.memory_gb else None
    if memory is not None and memory_bytes is not None:
        memory = min(memory, memory_bytes)
    return ContainerLimits(cpus=cpus, cpuset=tuple(pinned), memory_bytes=memory, gpus=tuple(gpus),
                           pids=pids_limit(machine.vcpus if machine is not None else None))


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
    container path ends in `:rw`), without the engine's log copy."""
    options = ["create", "--pull", "missing" if pull else "never", "--init", "--log-driver", "none", "--name", name,
               "--network", network, *label_options, *limits.engine_options(engine_kind),
               "--env-file", env_file]
    for host, inside in mounts.items():
        target, _, mode = inside.partition(":")
        options += ["--mount", bind_mount(host, target, read_only=mode != "rw")]
    return [*options, *extra_options, *command.engine_options(), "--", *command.positional_arguments()]


def bind_mount(source: str, target: str, *, read_only: bool) -> str:
    """A `--mount` value binding `source` at `target`. The engine reads it as one CSV record, so a
    field holding a comma or a quote is quoted; a colon needs nothing."""
    fields = ["type=bind", f"source={source}", f"target={target}", *(["readonly"] if read_only else [])]
    return ",".join(f'"{field.replace(chr(34), chr(34) * 2)}"' if ("," in field or '"' in field) else field
                    for field in fields)
