"""What this machine offers replicas: the cores aiptrain may run on and the NVIDIA GPUs.

GPUs are found with `nvidia-smi -L` (on the PATH of the environment given), never by importing
TensorFlow. Where the driver's device files exist (`/dev/nvidia0`, what the runtime environments
look at to choose TensorFlow's CUDA build) but `nvidia-smi` is not installed, each
`/dev/nvidiaN` counts as GPU N, so a machine that gets CUDA TensorFlow also gets its GPUs handed
out. A `CUDA_VISIBLE_DEVICES` of the user's narrows the GPUs to those it lists (indices or UUIDs;
empty: none).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aiptrain._replicas.machine_share import Gpu, Machine

_NVIDIA_SMI = "nvidia-smi"
_LIST_TIMEOUT_SECONDS = 20.0
# `GPU 0: Tesla T4 (UUID: GPU-5a7d...)`; MIG devices are listed indented under their GPU.
_GPU_LINE = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: ([^)]+)\))?\s*$")
_DEVICE_FILE = re.compile(r"^nvidia(\d+)$")


@dataclass(frozen=True)
class FoundGpu:
    index: int
    name: str
    uuid: str


def parse_gpu_list(text: str) -> list[FoundGpu]:
    """The GPUs of `nvidia-smi -L`'s output."""
    found = []
    for line in text.splitlines():
        match = _GPU_LINE.match(line)
        if match:
            found.append(FoundGpu(int(match.group(1)), match.group(2).strip(), match.group(3) or ""))
    return found


def visible_to_user(found: list[FoundGpu], env: Mapping[str, str]) -> list[FoundGpu]:
    """The GPUs a `CUDA_VISIBLE_DEVICES` in `env` leaves (all without one)."""
    if "CUDA_VISIBLE_DEVICES" not in env:
        return found
    wanted = [item.strip() for item in env["CUDA_VISIBLE_DEVICES"].split(",") if item.strip()]
    kept: list[FoundGpu] = []
    for item in wanted:
        if item.lstrip("-").isdigit() and int(item) < 0:
            break  # CUDA stops at the first invalid entry
        match = next((gpu for gpu in found if str(gpu.index) == item or (gpu.uuid and gpu.uuid.startswith(item))),
                     None)
        if match is None:
            break
        if match not in kept:
            kept.append(match)
    return kept


def _listed_by_nvidia_smi(env: Mapping[str, str]) -> list[FoundGpu] | None:
    """The GPUs `nvidia-smi -L` lists; None when there is no nvidia-smi. A failing nvidia-smi
    (no driver loaded) lists none."""
    program = shutil.which(_NVIDIA_SMI, path=env.get("PATH", os.defpath))
    if program is None:
        return None
    try:
        completed = subprocess.run([program, "-L"], capture_output=True, text=True, timeout=_LIST_TIMEOUT_SECONDS,
                                   check=False, env=dict(env), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_gpu_list(completed.stdout) if completed.returncode == 0 else []


def _device_files(dev: Path) -> list[FoundGpu]:
    try:
        names = os.listdir(dev)
    except OSError:
        return []
    indices = sorted(int(match.group(1)) for name in names if (match := _DEVICE_FILE.match(name)))
    return [FoundGpu(index, "", "") for index in indices]


def find_gpus(env: Mapping[str, str] | None = None, *, dev: Path = Path("/dev")) -> tuple[Gpu, ...]:
    source = os.environ if env is None else env
    listed = _listed_by_nvidia_smi(source)
    found = listed if listed is not None else _device_files(dev)
    return tuple(Gpu(gpu.index, gpu.name) for gpu in visible_to_user(found, source))


def usable_cores() -> tuple[int, ...]:
    """The CPU ids this process may run on (its affinity: a taskset or a cpuset narrows it)."""
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def this_machine(env: Mapping[str, str] | None = None, *, gpus: bool = True) -> Machine:
    """The machine as replicas started from this process find it (`gpus=False`: without asking
    for GPUs, for jobs that ask for none)."""
    return Machine(cores=usable_cores(), gpus=find_gpus(env) if gpus else ())
