"""Each replica's share of this machine: how many cores it sizes its thread pools for, which
cores it runs on, which GPUs it sees. Pure: (replicas, machine, what other jobs hold) -> shares.

On the service every replica had a VM of its machine type: its vCPUs, its GPUs. Here the replicas
of a job share one machine, so each gets the part its machine type asks for:

- **CPU.** A replica gets its machine type's vCPUs as whole cores; when the job asks for more
  cores than the machine has, every replica gets a part in proportion to its ask (at least one
  core each; highest averages, so the parts add up to the machine). Its thread pools are sized
  to it: TensorFlow's intra-op and inter-op pools (`TF_NUM_INTRAOP_THREADS`,
  `TF_NUM_INTEROP_THREADS`, read by TensorFlow 1.15 and 2.x alike: a pool grows and shrinks with
  them in a real process) and OpenMP/MKL (`OMP_NUM_THREADS`, which OpenBLAS, numpy's BLAS,
  honours too; `MKL_NUM_THREADS`). When the parts fit into cores no other running job is pinned
  to, and each has at least two, each replica is also pinned to its own cores (`cores`), which
  TensorFlow's defaults follow as well. A variable the user set in the environment is kept as set.
- **GPU.** A replica whose `acceleratorConfig` asks for N GPUs gets N devices no other replica
  holds (`CUDA_VISIBLE_DEVICES`, in `nvidia-smi`'s PCI bus order); a replica that asks for none
  sees none. Memory growth is on (`TF_FORCE_GPU_ALLOW_GROWTH`), so co-located processes do not
  each take a GPU's memory up front. A job that asks for more GPUs than are free waits; one that
  asks for more than the machine has is refused (`gpu_refusal`). A machine without GPUs runs GPU
  requests on its CPU, as before.

A tuning job runs several trials at once; each trial is a lane with its own shares.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiptrain._job.catalog import Catalog
from aiptrain._job.cluster import ReplicaGroup

# The variables sized to a replica's cores, in the order they are listed.
INTRA_OP = "TF_NUM_INTRAOP_THREADS"
INTER_OP = "TF_NUM_INTEROP_THREADS"
OPENMP = "OMP_NUM_THREADS"
MKL = "MKL_NUM_THREADS"
VISIBLE_GPUS = "CUDA_VISIBLE_DEVICES"
GPU_ORDER = "CUDA_DEVICE_ORDER"
ALLOW_GROWTH = "TF_FORCE_GPU_ALLOW_GROWTH"
# A blocking op (a TF1 queue's dequeue) holds an inter-op thread until another op runs: with a
# single inter-op thread that other op never would, so the inter-op pool has at least two.
_MIN_INTER_OP = 2
# Replicas are pinned only when each gets at least this many cores. Besides its thread pools a
# TensorFlow replica keeps several threads busy in turn (gRPC pollers, the input pipeline, the
# collective executor); pinned to one core each hand-off waits for that core, and anything else
# on it stalls the replica and, in synchronous training, the whole cluster. Measured on 2 cores
# (docs/benchmarks.md row 9): chief + worker pinned to a core each made 0.6x the steps/s of the same
# replicas unpinned with the same thread counts.
_MIN_PINNED_CORES = 2


@dataclass(frozen=True)
class Gpu:
    index: int  # nvidia-smi's index, the PCI bus order CUDA follows with CUDA_DEVICE_ORDER=PCI_BUS_ID
    name: str = ""


@dataclass(frozen=True)
class Machine:
    """What this machine offers replicas."""

    cores: tuple[int, ...]  # the CPU ids aiptrain may run on (its own affinity)
    gpus: tuple[Gpu, ...] = ()

    def gpu_name(self, index: int) -> str:
        return next((gpu.name for gpu in self.gpus if gpu.index == index), "")


@dataclass(frozen=True)
class ReplicaAsk:
    task_name: str
    vcpus: int  # its machine type's vCPUs; 0 when it names none (`local train`: equal parts)
    gpus: int = 0


@dataclass(frozen=True)
class ReplicaShare:
    task_name: str
    threads: int | None  # cores its thread pools are sized for; None: the CPU share is off
    cores: tuple[int, ...] = ()  # the cores it is pinned to; () not pinned
    gpus: tuple[int, ...] = ()  # GPU indices it sees

    def environment(self, inherited: Mapping[str, str], *, gpus: bool = True) -> tuple[dict[str, str], list[str]]:
        """(variables to set, names kept because `inherited` already sets them).

        `gpus=False` leaves the GPU variables alone (`local train`, which has no accelerators to
        ask for, so its replicas see what they would see without aiptrain)."""
        wanted: dict[str, str] = {}
        if self.threads is not None:
            wanted[INTRA_OP] = str(self.threads)
            wanted[INTER_OP] = str(max(self.threads, _MIN_INTER_OP))
            wanted[OPENMP] = str(self.threads)
            wanted[MKL] = str(self.threads)
        if gpus:
            wanted[ALLOW_GROWTH] = "true"
        kept = [name for name in wanted if name in inherited]
        chosen = {name: value for name, value in wanted.items() if name not in inherited}
        if gpus:
            # Never the user's: which devices a replica sees is the point of the share (the user's
            # CUDA_VISIBLE_DEVICES already narrowed the machine's GPUs to pick from).
            chosen[VISIBLE_GPUS] = ",".join(str(index) for index in self.gpus)
            chosen[GPU_ORDER] = "PCI_BUS_ID"
        return chosen, kept

    def describe(self, machine: Machine | int) -> str:
        """`2 of 16 cores (cores 0-1), GPU 1 (Tesla T4)`."""
        total = machine if isinstance(machine, int) else len(machine.cores)
        if self.threads is None:
            text = f"all {total} cores (CPU share off)"
        else:
            text = f"{self.threads} of {total} cores"
            if self.cores:
                text += f" ({'core' if len(self.cores) == 1 else 'cores'} {core_ranges(self.cores)})"
        if self.gpus:
            names = [machine.gpu_name(index) if isinstance(machine, Machine) else "" for index in self.gpus]
            listed = ", ".join(f"{index} ({name})" if name else str(index) for index, name in zip(self.gpus, names,
                                                                                                 strict=True))
            text += f", {'GPU' if len(self.gpus) == 1 else 'GPUs'} {listed}"
        return text


@dataclass(frozen=True)
class JobShare:
    """A job's part of the machine: one set of replica shares per trial running at once."""

    machine_cores: int
    lanes: tuple[tuple[ReplicaShare, ...], ...]
    machine_gpus: int = 0
    gpu_names: dict[int, str] = field(default_factory=dict)  # of the GPUs it holds

    def held_cores(self) -> set[int]:
        return {core for lane in self.lanes for share in lane for core in share.cores}

    def held_gpus(self) -> set[int]:
        return {gpu for lane in self.lanes for share in lane for gpu in share.gpus}

    def lines(self) -> list[str]:
        """`master-replica-0: 2 of 16 cores (cores 0-1)`, one per replica of each lane."""
        machine = Machine(tuple(range(self.machine_cores)),
                          tuple(Gpu(index, name) for index, name in self.gpu_names.items()))
        prefix = len(self.lanes) > 1
        return [
            f"{f'trial slot {number}, ' if prefix else ''}{share.task_name}: {share.describe(machine)}"
            for number, lane in enumerate(self.lanes, start=1)
            for share in lane
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "machineCores": self.machine_cores,
            "machineGpus": self.machine_gpus,
            "gpuNames": {str(index): name for index, name in self.gpu_names.items()},
            "lanes": [[{"task": s.task_name, "threads": s.threads, "cores": list(s.cores), "gpus": list(s.gpus)}
                       for s in lane] for lane in self.lanes],
            # What the store adds up across running jobs (machine-wide holds).
            "cores": sorted(self.held_cores()),
            "gpus": sorted(self.held_gpus()),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobShare:
        return cls(
            machine_cores=int(data["machineCores"]),
            machine_gpus=int(data.get("machineGpus", 0)),
            lanes=tuple(
                tuple(ReplicaShare(str(s["task"]), None if s["threads"] is None else int(s["threads"]),
                                   tuple(int(c) for c in s["cores"]), tuple(int(g) for g in s["gpus"]))
                      for s in lane)
                for lane in data["lanes"]
            ),
            gpu_names={int(index): str(name) for index, name in data.get("gpuNames", {}).items()},
        )


@dataclass(frozen=True)
class GpuWait:
    """The job's GPUs are not free now: it waits."""

    needed: int
    free: int
    total: int


def core_ranges(cores: Iterable[int]) -> str:
    """(0, 1, 2, 5) -> `0-2,5` (the notation of taskset and cpusets)."""
    ordered = sorted(set(cores))
    parts: list[str] = []
    start = previous = None
    for core in [*ordered, None]:
        if core is not None and previous is not None and core == previous + 1:
            previous = core
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = core
    return ",".join(parts)


def replica_asks(groups: Sequence[ReplicaGroup], catalog: Catalog) -> list[ReplicaAsk]:
    """What each replica asks for, in the order of `groups` (the primary first)."""
    asks: list[ReplicaAsk] = []
    for group in groups:
        kind = catalog.accelerators.get(group.accelerator_type or "", {}).get("kind")
        gpus = group.accelerator_count if kind == "gpu" else 0
        vcpus = catalog.vcpus(group.machine_type)
        asks += [ReplicaAsk(name, vcpus, gpus) for name in group.task_names()]
    return asks


def cpu_counts(vcpus: Sequence[int], cores: int) -> list[int]:
    """Whole cores per replica: each its ask when the asks fit into `cores`; else parts in
    proportion to the asks, at least 1 each, that add up to `cores` (every replica gets 1 when
    there are more replicas than cores). An ask of 0 (unknown) counts as an equal part."""
    if not vcpus:
        return []
    known = [ask for ask in vcpus if ask > 0]
    asks = [ask if ask > 0 else (max(known) if known else cores) for ask in vcpus]
    if sum(asks) <= cores:
        return asks
    counts = [1] * len(asks)
    spare = cores - len(asks)
    # Highest averages (D'Hondt): the next core goes to the replica with the largest ask per core
    # it would then have; ties to the earlier replica (the primary first).
    queue = [(-ask / 2, index) for index, ask in enumerate(asks) if ask > 1]
    heapq.heapify(queue)
    while spare > 0 and queue:
        _, index = heapq.heappop(queue)
        counts[index] += 1
        spare -= 1
        if counts[index] < asks[index]:
            heapq.heappush(queue, (-asks[index] / (counts[index] + 1), index))
    return counts


def pinned_cores(counts: Sequence[int], free: Sequence[int]) -> list[tuple[int, ...]]:
    """Disjoint runs of the free cores, one per count; [] when they do not all fit, or when a
    replica would get fewer than two cores (it runs unpinned, its threads still sized)."""
    if not counts or sum(counts) > len(free) or min(counts) < _MIN_PINNED_CORES:
        return []
    runs: list[tuple[int, ...]] = []
    start = 0
    for count in counts:
        runs.append(tuple(free[start:start + count]))
        start += count
    return runs


def share_job(
    asks: Sequence[ReplicaAsk],
    machine: Machine,
    *,
    held_cores: Iterable[int] = (),
    held_gpus: Iterable[int] = (),
    lanes: int = 1,
    cpu: bool = True,
    pin: bool = True,
) -> JobShare | GpuWait:
    """Every replica's share, `lanes` times over (trials at once), around what others hold.

    The thread counts are parts of the whole machine (what the job's machine types ask for); the
    cores they are pinned to are taken from the cores nobody else holds, only when every part fits
    there and has at least two cores (`pin=False`: never pinned). GPUs go to the replicas that ask for them, lowest free
    index first; GpuWait when too few are free. On a machine without GPUs nobody gets any.
    """
    all_asks = [ask for _ in range(lanes) for ask in asks]
    counts = cpu_counts([ask.vcpus for ask in all_asks], len(machine.cores)) if cpu else [0] * len(all_asks)
    busy = set(held_cores)
    free_cores = [core for core in machine.cores if core not in busy]
    runs = pinned_cores(counts, free_cores) if cpu and pin else []
    taken = set(held_gpus)
    free_gpus = [gpu.index for gpu in machine.gpus if gpu.index not in taken]
    needed = sum(ask.gpus for ask in all_asks) if machine.gpus else 0
    if needed > len(free_gpus):
        return GpuWait(needed=needed, free=len(free_gpus), total=len(machine.gpus))
    shares: list[ReplicaShare] = []
    next_gpu = 0
    for position, ask in enumerate(all_asks):
        given = tuple(free_gpus[next_gpu:next_gpu + ask.gpus]) if machine.gpus else ()
        next_gpu += len(given)
        shares.append(ReplicaShare(
            task_name=ask.task_name,
            threads=counts[position] if cpu else None,
            cores=runs[position] if runs else (),
            gpus=given,
        ))
    per_lane = len(asks)
    return JobShare(
        machine_cores=len(machine.cores),
        machine_gpus=len(machine.gpus),
        lanes=tuple(tuple(shares[lane * per_lane:(lane + 1) * per_lane]) for lane in range(lanes)),
        gpu_names={gpu.index: gpu.name for gpu in machine.gpus if gpu.index in set(free_gpus[:next_gpu])},
    )


def gpus_per_run(asks: Sequence[ReplicaAsk]) -> int:
    return sum(ask.gpus for ask in asks)


def gpu_refusal(asks: Sequence[ReplicaAsk], gpus: Sequence[Gpu]) -> str | None:
    """Why a machine with `gpus` can never run the job's GPU requests (None: it can, or it has
    no GPUs, and they run on the CPU)."""
    needed = gpus_per_run(asks)
    if not gpus or needed <= len(gpus):
        return None
    askers = ", ".join(f"{ask.task_name} {ask.gpus}" for ask in asks if ask.gpus)
    return f"the job's replicas ask for {needed} GPUs in all ({askers}); this machine has {len(gpus)}"
