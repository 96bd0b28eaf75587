"""Each replica's share of the machine, on tables: cores, pinning, GPUs, what a replica is told."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aiptrain._job.catalog import load_catalog
from aiptrain._job.cluster import resolve_cluster
from aiptrain._job.spec import Job, TrainingInput
from aiptrain._replicas.cluster_plan import local_problems, plan_cluster, trial_lanes, trials_at_once
from aiptrain._replicas.machine_share import (
    Gpu,
    GpuWait,
    JobShare,
    Machine,
    ReplicaAsk,
    ReplicaShare,
    core_ranges,
    cpu_counts,
    gpu_refusal,
    replica_asks,
    share_job,
)
from aiptrain._replicas.settings import ReplicaSettings
from aiptrain._replicas.this_machine import find_gpus, parse_gpu_list, visible_to_user

STANDARD_1 = [8, 8, 8, 8, 8, 4, 4, 4]  # master, 4 workers (n1-highcpu-8), 3 ps (n1-standard-4)


@pytest.mark.parametrize(
    ("asks", "cores", "expected"),
    [
        ([4], 16, [4]),  # BASIC on a big machine: its n1-standard-4, not all 16
        ([4, 4], 2, [1, 1]),  # chief + worker on 2 cores
        (STANDARD_1, 16, [3, 3, 3, 2, 2, 1, 1, 1]),  # 52 vCPUs asked: parts in proportion, 16 in all
        (STANDARD_1, 2, [1] * 8),  # more replicas than cores: one each
        (STANDARD_1, 64, STANDARD_1),  # it fits: each its machine type
        ([8, 4], 6, [4, 2]),
        ([1, 16], 4, [1, 3]),  # never more than a replica asked for
        ([0, 0], 4, [2, 2]),  # no machine type (`local train`): equal parts
        ([0], 4, [4]),
        ([], 4, []),
    ],
)
def test_cores_per_replica(asks: list[int], cores: int, expected: list[int]) -> None:
    counts = cpu_counts(asks, cores)
    assert counts == expected
    assert all(count >= 1 for count in counts)


def _asks(*vcpus_and_gpus: tuple[int, int]) -> list[ReplicaAsk]:
    return [ReplicaAsk(f"r{index}", vcpus, gpus) for index, (vcpus, gpus) in enumerate(vcpus_and_gpus)]


def _t4s(count: int) -> tuple[Gpu, ...]:
    return tuple(Gpu(index, "Tesla T4") for index in range(count))


@pytest.mark.parametrize(
    ("asks", "machine", "held_cores", "pin", "expected"),
    [
        # (threads, cores) per replica
        (_asks((4, 0), (4, 0)), Machine((0, 1, 2, 3)), set(), True, [(2, (0, 1)), (2, (2, 3))]),
        (_asks((4, 0), (4, 0)), Machine((0, 1, 2, 3)), {0, 1}, True, [(2, ()), (2, ())]),  # others hold half
        (_asks((2, 0), (2, 0)), Machine((0, 1, 2, 3, 4)), {0}, True, [(2, (1, 2)), (2, (3, 4))]),  # around a hold
        (_asks((4, 0), (4, 0)), Machine((0, 1, 2, 3)), set(), False, [(2, ()), (2, ())]),
        (_asks((4, 0), (4, 0)), Machine((0, 1)), set(), True, [(1, ()), (1, ())]),  # one core each: unpinned
        (_asks((4, 0), (1, 0)), Machine((0, 1, 2, 3, 4)), set(), True, [(4, ()), (1, ())]),  # one gets a core
        (_asks((4, 0), (4, 0), (4, 0)), Machine((0, 1)), set(), True, [(1, ())] * 3),  # cannot be disjoint
        (_asks((4, 0)), Machine((4, 5, 6, 7, 8, 9)), set(), True, [(4, (4, 5, 6, 7))]),  # a taskset's cores
    ],
)
def test_threads_and_pinned_cores(asks: list[ReplicaAsk], machine: Machine, held_cores: set[int], pin: bool,
                                  expected: list[tuple[int, tuple[int, ...]]]) -> None:
    share = share_job(asks, machine, held_cores=held_cores, pin=pin)
    assert isinstance(share, JobShare)
    assert [(replica.threads, replica.cores) for replica in share.lanes[0]] == expected
    assert share.held_cores() == {core for _, cores in expected for core in cores}


def test_cpu_share_off_sizes_nothing() -> None:
    share = share_job(_asks((4, 0), (4, 0)), Machine((0, 1, 2, 3)), cpu=False)
    assert isinstance(share, JobShare)
    assert [(r.threads, r.cores) for r in share.lanes[0]] == [(None, ()), (None, ())]
    assert share.lanes[0][0].environment({})[0] == {"TF_FORCE_GPU_ALLOW_GROWTH": "true",
                                                    "CUDA_VISIBLE_DEVICES": "", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


@pytest.mark.parametrize(
    ("asks", "gpus", "held", "expected"),
    [
        # master 1, two workers 1 each, a ps none: disjoint, lowest first; the ps sees none
        (_asks((4, 1), (4, 1), (4, 1), (4, 0)), 4, set(), [(0,), (1,), (2,), ()]),
        (_asks((4, 1), (4, 1)), 4, {0, 2}, [(1,), (3,)]),  # around another job's
        (_asks((4, 2), (4, 0)), 2, set(), [(0, 1), ()]),
        (_asks((4, 1), (4, 1), (4, 1)), 4, {0, 1}, GpuWait(needed=3, free=2, total=4)),
        (_asks((4, 1), (4, 1)), 0, set(), [(), ()]),  # no GPU here: they run on the CPU
        (_asks((4, 0)), 2, {0, 1}, [()]),  # asks for none: never waits for GPUs
    ],
)
def test_gpus_per_replica(asks: list[ReplicaAsk], gpus: int, held: set[int],
                          expected: list[tuple[int, ...]] | GpuWait) -> None:
    share = share_job(asks, Machine((0, 1, 2, 3), _t4s(gpus)), held_gpus=held)
    if isinstance(expected, GpuWait):
        assert share == expected
        return
    assert isinstance(share, JobShare)
    assert [replica.gpus for replica in share.lanes[0]] == expected
    given = [gpu for replica in expected for gpu in replica]
    assert len(given) == len(set(given)) and not set(given) & held


def test_trials_at_once_each_get_their_own_cores_and_gpus() -> None:
    share = share_job(_asks((4, 1), (4, 0)), Machine((0, 1, 2, 3, 4, 5, 6, 7), _t4s(2)), lanes=2)
    assert isinstance(share, JobShare)
    assert [[(r.task_name, r.cores, r.gpus) for r in lane] for lane in share.lanes] == [
        [("r0", (0, 1), (0,)), ("r1", (2, 3), ())],
        [("r0", (4, 5), (1,)), ("r1", (6, 7), ())],
    ]
    assert share.lines()[0] == "trial slot 1, r0: 2 of 8 cores (cores 0-1), GPU 0 (Tesla T4)"


@pytest.mark.parametrize(
    ("share", "inherited", "gpus", "expected", "kept"),
    [
        (ReplicaShare("m", 2, (0, 1), (1,)), {}, True,
         {"TF_NUM_INTRAOP_THREADS": "2", "TF_NUM_INTEROP_THREADS": "2", "OMP_NUM_THREADS": "2",
          "MKL_NUM_THREADS": "2", "TF_FORCE_GPU_ALLOW_GROWTH": "true", "CUDA_VISIBLE_DEVICES": "1",
          "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, []),
        # one core: the inter-op pool keeps two threads (a blocking op must not starve it)
        (ReplicaShare("m", 1), {}, False,
         {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "2", "OMP_NUM_THREADS": "1",
          "MKL_NUM_THREADS": "1"}, []),
        # the user's own variables stay; which GPUs a replica sees is never the user's to widen
        (ReplicaShare("m", 4, (), (0, 2)), {"OMP_NUM_THREADS": "8", "TF_FORCE_GPU_ALLOW_GROWTH": "false",
                                             "CUDA_VISIBLE_DEVICES": "0,1,2,3"}, True,
         {"TF_NUM_INTRAOP_THREADS": "4", "TF_NUM_INTEROP_THREADS": "4", "MKL_NUM_THREADS": "4",
          "CUDA_VISIBLE_DEVICES": "0,2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
         ["OMP_NUM_THREADS", "TF_FORCE_GPU_ALLOW_GROWTH"]),
    ],
)
def test_what_a_replica_is_told(share: ReplicaShare, inherited: dict[str, str], gpus: bool,
                                expected: dict[str, str], kept: list[str]) -> None:
    assert share.environment(inherited, gpus=gpus) == (expected, kept)


@pytest.mark.parametrize(
    ("share", "text"),
    [
        (ReplicaShare("m", 2, (0, 1), (1,)), "2 of 16 cores (cores 0-1), GPU 1 (Tesla T4)"),
        (ReplicaShare("m", 1, (5,)), "1 of 16 cores (core 5)"),
        (ReplicaShare("m", 3), "3 of 16 cores"),
        (ReplicaShare("m", None, (), (0, 1)), "all 16 cores (CPU share off), GPUs 0 (Tesla T4), 1 (Tesla T4)"),
    ],
)
def test_describe(share: ReplicaShare, text: str) -> None:
    assert share.describe(Machine(tuple(range(16)), _t4s(2))) == text


@pytest.mark.parametrize(("cores", "text"), [((0, 1, 2, 5), "0-2,5"), ((3,), "3"), ((), ""), ((7, 1, 2), "1-2,7")])
def test_core_ranges(cores: tuple[int, ...], text: str) -> None:
    assert core_ranges(cores) == text


def test_a_recorded_share_reads_back() -> None:
    share = share_job(_asks((4, 1), (4, 0)), Machine((0, 1, 2, 3), _t4s(1)), lanes=1)
    assert isinstance(share, JobShare)
    stored = share.to_json()
    assert stored["cores"] == [0, 1, 2, 3] and stored["gpus"] == [0]
    assert JobShare.from_json(stored) == share


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        ({"scaleTier": "STANDARD_1"}, [8, 8, 8, 8, 8, 4, 4, 4]),
        ({"scaleTier": "BASIC_GPU"}, [8]),
        ({"scaleTier": "CUSTOM", "masterType": "complex_model_m_gpu"}, [16]),  # legacy: its n1 equivalent
        ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerType": "n1-highmem-2", "workerCount": "2",
          "workerConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}}}, [4, 2, 2]),
    ],
)
def test_what_replicas_ask_for(inputs: dict[str, object], expected: list[int]) -> None:
    catalog = load_catalog()
    asks = replica_asks(resolve_cluster(TrainingInput.model_validate(inputs), catalog), catalog)
    assert [ask.vcpus for ask in asks] == expected
    gpus = {"BASIC_GPU": [1], "STANDARD_1": [0] * 8}.get(str(inputs["scaleTier"]))
    if inputs.get("masterType") == "complex_model_m_gpu":
        gpus = [4]
    elif inputs.get("workerType"):
        gpus = [0, 1, 1]
    assert [ask.gpus for ask in asks] == gpus


def test_tpu_accelerators_are_not_gpus() -> None:
    catalog = load_catalog()
    asks = replica_asks(resolve_cluster(TrainingInput.model_validate({"scaleTier": "BASIC_TPU"}), catalog), catalog)
    assert [ask.gpus for ask in asks] == [0, 0]


def test_gpu_refusal_names_the_numbers() -> None:
    asks = _asks((4, 1), (4, 2))
    assert gpu_refusal(asks, _t4s(2)) == ("the job's replicas ask for 3 GPUs in all (r0 1, r1 2); "
                                          "this machine has 2")
    assert gpu_refusal(asks, _t4s(3)) is None
    assert gpu_refusal(asks, ()) is None  # no GPU at all: the CPU runs it


def _job(inputs: dict[str, object]) -> Job:
    base = {"region": "us-central1", "pythonModule": "t.task", "packageUris": ["gs://b/p.tar.gz"]}
    return Job.model_validate({"jobId": "x", "trainingInput": {**base, **inputs}})


@pytest.mark.parametrize(
    ("inputs", "field"),
    [
        ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4",
          "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "2"}}},
         "trainingInput.masterConfig.acceleratorConfig.count"),
        ({"scaleTier": "CUSTOM", "masterType": "complex_model_m_gpu"}, "trainingInput.masterType"),
    ],
)
def test_the_local_backend_refuses_more_gpus_than_the_machine_has(inputs: dict[str, object], field: str) -> None:
    settings = ReplicaSettings(max_running=1)
    job = _job(inputs)
    problems = local_problems(job, load_catalog(), settings, gpus=lambda: _t4s(1))
    assert [p.path for p in problems] == [field]
    assert "this machine has 1" in problems[0].message and "at most 1 GPUs" in (problems[0].hint or "")
    assert local_problems(job, load_catalog(), settings, gpus=lambda: _t4s(4)) == []
    assert local_problems(job, load_catalog(), settings, gpus=lambda: ()) == []  # runs on the CPU, warned
    plan = plan_cluster(job.training_input or TrainingInput(), load_catalog(), settings, gpus=lambda: ())
    assert any("no GPU" in warning for warning in plan.warnings)
    plan = plan_cluster(job.training_input or TrainingInput(), load_catalog(), settings, gpus=lambda: _t4s(4))
    assert plan.warnings == []


def test_a_job_without_gpus_never_looks_for_them() -> None:
    def looked() -> tuple[Gpu, ...]:
        raise AssertionError("GPUs were looked for")

    job = _job({"scaleTier": "STANDARD_1"})
    assert local_problems(job, load_catalog(), ReplicaSettings(max_running=1), gpus=looked) == []


def test_tuning_trials_at_once_fit_the_gpus() -> None:
    catalog = load_catalog()
    inputs = TrainingInput.model_validate({
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4",
        "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}},
        "hyperparameters": {"goal": "MAXIMIZE", "maxTrials": 6, "maxParallelTrials": 4, "params": []},
    })
    groups = resolve_cluster(inputs, catalog)
    parallel, warning = trials_at_once(4, groups, gpus_per_trial=1, machine_gpus=2)
    assert parallel == 2 and warning is not None and "2 GPUs" in warning
    assert trials_at_once(4, groups) == (4, None)
    assert trial_lanes(inputs, groups, catalog, machine_gpus=2) == 2
    assert trial_lanes(inputs, groups, catalog, machine_gpus=0) == 4
    single = TrainingInput.model_validate({"scaleTier": "BASIC"})
    assert trial_lanes(single, resolve_cluster(single, catalog), catalog, machine_gpus=2) == 1


NVIDIA_SMI_L = """GPU 0: Tesla T4 (UUID: GPU-5a7d1c2e-0000-1111-2222-333344445555)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-aaaaaaaa-0000-1111-2222-333344445555)
  MIG 1g.5gb      Device  0: (UUID: MIG-bbbbbbbb-0000-1111-2222-333344445555)
GPU 2: Tesla T4 (UUID: GPU-cccccccc-0000-1111-2222-333344445555)
"""


def test_nvidia_smi_lines_are_read() -> None:
    found = parse_gpu_list(NVIDIA_SMI_L)
    assert [(gpu.index, gpu.name) for gpu in found] == [(0, "Tesla T4"), (1, "NVIDIA A100-SXM4-40GB"), (2, "Tesla T4")]
    assert found[2].uuid == "GPU-cccccccc-0000-1111-2222-333344445555"


@pytest.mark.parametrize(
    ("visible", "indices"),
    [
        (None, [0, 1, 2]),
        ("2,0", [2, 0]),
        ("GPU-aaaa", [1]),  # a UUID prefix, as CUDA takes it
        ("", []),
        ("-1", []),
        ("0,7,2", [0]),  # CUDA stops at the first device that does not exist
    ],
)
def test_the_users_cuda_visible_devices_narrows_the_gpus(visible: str | None, indices: list[int]) -> None:
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    assert [gpu.index for gpu in visible_to_user(parse_gpu_list(NVIDIA_SMI_L), env)] == indices


def _fake_nvidia_smi(directory: Path, output: str, status: int = 0) -> dict[str, str]:
    script = directory / "nvidia-smi"
    script.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] || exit 3\ncat <<'EOF'\n{output}EOF\nexit {status}\n")
    script.chmod(0o755)
    return {"PATH": f"{directory}{os.pathsep}{os.environ['PATH']}"}


def test_gpus_are_found_with_nvidia_smi(tmp_path: Path) -> None:
    env = _fake_nvidia_smi(tmp_path, NVIDIA_SMI_L)
    assert find_gpus(env) == (Gpu(0, "Tesla T4"), Gpu(1, "NVIDIA A100-SXM4-40GB"), Gpu(2, "Tesla T4"))
    assert find_gpus({**env, "CUDA_VISIBLE_DEVICES": "1"}) == (Gpu(1, "NVIDIA A100-SXM4-40GB"),)


def test_a_failing_nvidia_smi_finds_none(tmp_path: Path) -> None:
    env = _fake_nvidia_smi(tmp_path, "NVIDIA-SMI has failed because it couldn't communicate with the driver\n", 9)
    assert find_gpus(env) == ()


def test_without_nvidia_smi_the_device_files_count(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "null"):
        (dev / name).touch()
    empty = tmp_path / "bin"
    empty.mkdir()
    assert find_gpus({"PATH": str(empty)}, dev=dev) == (Gpu(0), Gpu(1))
    assert find_gpus({"PATH": str(empty)}, dev=tmp_path / "nothing") == ()
