"""What a container replica runs and how the engine is asked to create it (pure: no engine)."""

from __future__ import annotations

import dataclasses

import pytest

from aiptrain._job.catalog import load_catalog
from aiptrain._job.cluster import ReplicaGroup, resolve_cluster
from aiptrain._job.spec import TrainingInput
from aiptrain._replicas.containers.command import (
    ContainerCommand,
    ContainerLimits,
    ContainerNames,
    container_command,
    machine_limits,
    replica_create_arguments,
)
from aiptrain._replicas.containers.settings import ContainerSettings
from aiptrain.errors import UsageError


def _groups(**fields: object) -> tuple[TrainingInput, list[ReplicaGroup]]:
    training_input = TrainingInput.model_validate({"region": "us-central1", "scaleTier": "CUSTOM",
                                                   "masterType": "n1-standard-4", **fields})
    return training_input, resolve_cluster(training_input, load_catalog())


def _command(training_input: TrainingInput, group: ReplicaGroup, **kwargs: object) -> ContainerCommand:
    options = {"args": training_input.args or [], "job_dir": "gs://b/out", "job_dir_argument": True, **kwargs}
    return container_command(training_input, group, **options)  # type: ignore[arg-type]


def test_the_job_args_follow_the_image_entrypoint_then_job_dir() -> None:
    ti, groups = _groups(masterConfig={"imageUri": "gcr.io/p/t:1"}, args=["--epochs", "3"])
    command = _command(ti, groups[0])
    assert command == ContainerCommand("gcr.io/p/t:1", None, ("--epochs", "3", "--job-dir", "gs://b/out"))
    assert command.engine_arguments() == ["gcr.io/p/t:1", "--epochs", "3", "--job-dir", "gs://b/out"]
    # Vertex AI hands the directory over through AIP_* only; no args at all: the image's CMD.
    assert _command(ti, groups[0], job_dir_argument=False).args == ("--epochs", "3")
    bare, bare_groups = _groups(masterConfig={"imageUri": "gcr.io/p/t:1"})
    assert _command(bare, bare_groups[0], job_dir=None).engine_arguments() == ["gcr.io/p/t:1"]


@pytest.mark.parametrize(("config", "expected"), [
    # command only: that command, no args (ENTRYPOINT and CMD ignored)
    ({"containerCommand": ["python", "-m", "t"]}, ["--entrypoint=python", "gcr.io/p/t:1", "-m", "t"]),
    # args only: the image's ENTRYPOINT with them
    ({"containerArgs": ["--a", "1"]}, ["gcr.io/p/t:1", "--a", "1"]),
    # both: command + args
    ({"containerCommand": ["sh", "-c"], "containerArgs": ["echo hi"]},
     ["--entrypoint=sh", "gcr.io/p/t:1", "-c", "echo hi"]),
])
def test_container_command_and_args_follow_kubernetes_rules(config: dict[str, list[str]], expected: list[str]) -> None:
    ti, groups = _groups(masterConfig={"imageUri": "gcr.io/p/t:1", **config})
    assert _command(ti, groups[0]).engine_arguments() == expected  # no --job-dir: they are the whole line


def test_trial_flags_follow_whatever_applies() -> None:
    ti, groups = _groups(masterConfig={"imageUri": "gcr.io/p/t:1", "containerArgs": ["--a"]})
    assert _command(ti, groups[0], extra_args=["--lr=0.1"]).args == ("--a", "--lr=0.1")
    ti, groups = _groups(masterConfig={"imageUri": "gcr.io/p/t:1"}, args=["--a"])
    assert _command(ti, groups[0], extra_args=["--lr=0.1"]).args == ("--a", "--lr=0.1", "--job-dir", "gs://b/out")


def test_other_replica_types_default_to_the_master_image_with_their_own_command() -> None:
    ti, groups = _groups(masterConfig={"imageUri": "gcr.io/p/m:1", "containerArgs": ["--m"]},
                         workerType="n1-standard-4", workerCount=2,
                         parameterServerType="n1-standard-4", parameterServerCount=1,
                         parameterServerConfig={"imageUri": "gcr.io/p/ps:1"}, args=None)
    master, worker, ps = (_command(ti, group) for group in groups)
    assert (master.image, worker.image, ps.image) == ("gcr.io/p/m:1", "gcr.io/p/m:1", "gcr.io/p/ps:1")
    assert master.args == ("--m",) and worker.args == ("--job-dir", "gs://b/out")


def test_limits_come_from_the_share_or_the_machine_type_within_this_machine() -> None:
    catalog = load_catalog()
    _, groups = _groups(masterConfig={"imageUri": "i"})  # n1-standard-4: 4 vCPUs, 15 GB
    by_type = machine_limits(groups[0], catalog, cores=2, memory_bytes=8 * 1024**3)
    assert by_type == ContainerLimits(cpus=2.0, memory_bytes=8 * 1024**3, pids=2048)
    roomy = machine_limits(groups[0], catalog, cores=64, memory_bytes=None, threads=3, pinned=(4, 5, 6), gpus=(1,))
    assert roomy == ContainerLimits(cpus=3.0, cpuset=(4, 5, 6), memory_bytes=15 * 1024**3, gpus=(1,), pids=2048)
    assert roomy.engine_options("docker") == ["--cpus", "3", "--cpuset-cpus", "4,5,6", "--memory", "15360m",
                                              "--gpus", '"device=1"', "--pids-limit", "2048"]
    assert roomy.engine_options("podman")[-4:-2] == ["--device", "nvidia.com/gpu=1"]
    assert ContainerLimits().engine_options("docker") == []


def test_names_are_unique_per_run_and_safe_for_the_engine() -> None:
    names = ContainerNames.for_run("0123456789abcdef01234567/trial 3/x")
    assert names.network == "aiptrain-0123456789ab-trial-3-x"
    assert names.replica("worker-replica-1") == "aiptrain-0123456789ab-trial-3-x-worker-replica-1"
    assert ContainerNames.for_run("0123456789abcdef01234567").prefix == "aiptrain-0123456789ab-run"


def test_a_replica_is_created_in_its_owner_namespace_with_init_labels_limits_and_no_pull() -> None:
    arguments = replica_create_arguments(
        engine_kind="docker", name="n-master-replica-0", network="container:n-master-replica-0-net",
        command=ContainerCommand("gcr.io/p/t:1", None, ("--a",)), limits=ContainerLimits(cpus=1.0),
        label_options=["--label", "aiptrain.job=j"], env_file="/e", mounts={"/h/ca.pem": "/run/ca.pem"}, pull=False)
    assert arguments == ["create", "--pull", "never", "--init", "--log-driver", "none", "--name", "n-master-replica-0",
                         "--network", "container:n-master-replica-0-net", "--label", "aiptrain.job=j",
                         "--cpus", "1", "--env-file", "/e",
                         "--mount", "type=bind,source=/h/ca.pem,target=/run/ca.pem,readonly",
                         "--", "gcr.io/p/t:1", "--a"]


def test_mounts_from_paths_holding_colons_or_commas_stay_one_field_each() -> None:
    arguments = replica_create_arguments(
        engine_kind="docker", name="n", network="none", command=ContainerCommand("i", ("--help",), None),
        limits=ContainerLimits(), label_options=[], env_file="/e", pull=False,
        mounts={"/home/me/a:b/work": "/tmp/hypertune:rw", "/x,y/ca.pem": "/run/ca.pem"})
    assert "--volume" not in arguments
    mounts = [arguments[i + 1] for i, option in enumerate(arguments) if option == "--mount"]
    assert mounts == ["type=bind,source=/home/me/a:b/work,target=/tmp/hypertune",
                      'type=bind,"source=/x,y/ca.pem",target=/run/ca.pem,readonly']
    # The entrypoint is an option; what follows `--` is never read as one, whatever the image's name.
    assert arguments[-3:] == ["--entrypoint=--help", "--", "i"]


@pytest.mark.parametrize(("machine_type", "pids"), [
    ("n1-standard-4", 2048), ("n1-standard-16", 8192), ("n1-highcpu-96", 49152), ("no-such-type", 4096)])
def test_a_replicas_process_limit_follows_its_machine_type(machine_type: str, pids: int) -> None:
    _, groups = _groups(masterConfig={"imageUri": "i"})
    group = dataclasses.replace(groups[0], machine_type=machine_type)
    limits = machine_limits(group, load_catalog(), cores=2, memory_bytes=None)
    assert limits.pids == pids
    assert limits.engine_options("docker")[-2:] == ["--pids-limit", str(pids)]


def test_settings_refuse_what_they_do_not_know() -> None:
    assert ContainerSettings.from_env({}) == ContainerSettings("auto", "never")
    assert ContainerSettings.from_env({"AIPTRAIN_CONTAINER_ENGINE": "Podman", "AIPTRAIN_CONTAINER_PULL": "missing"}
                                      ).pulls
    assert ContainerSettings.from_env({"AIPTRAIN_CONTAINER_ENGINE": "/opt/bin/docker"}).engine == "/opt/bin/docker"
    with pytest.raises(UsageError, match="AIPTRAIN_CONTAINER_ENGINE='rkt'"):
        ContainerSettings.from_env({"AIPTRAIN_CONTAINER_ENGINE": "rkt"})
    with pytest.raises(UsageError, match="AIPTRAIN_CONTAINER_PULL='always'"):
        ContainerSettings.from_env({"AIPTRAIN_CONTAINER_PULL": "always"})


def test_podman_gets_limits_runc_accepts_and_an_init_it_can_find() -> None:
    import resource

    from aiptrain._replicas.containers.container_engine import ContainerEngine

    assert ContainerEngine("docker", "/usr/bin/docker").create_options() == []
    options = ContainerEngine("podman", "/usr/bin/podman").create_options()
    limits = dict(option.split("=", 1) for option in options[1::2] if "=" in option)
    hard_files = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    with open("/proc/sys/kernel/pid_max") as pid_max:
        assert int(limits["nproc"].split(":")[0]) <= int(pid_max.read())  # never above what runc accepts
    assert int(limits["nofile"].split(":")[0]) <= hard_files  # never raised
