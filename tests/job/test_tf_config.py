"""TF_CONFIG, CLUSTER_SPEC and replica variables, as pure functions (no processes)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aiptrain._job.catalog import load_catalog
from aiptrain._job.cluster import resolve_cluster
from aiptrain._job.spec import Job
from aiptrain._job.tf_config import (
    PLACEHOLDER_ADDRESS,
    cluster_specs_for,
    replica_environment,
    tf_configs_for,
)
from aiptrain._replicas.ports import consecutive_addresses, free_addresses, free_ports


def _job(**inputs: object) -> Job:
    base: dict[str, object] = {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "region": "us-central1"}
    base.update(inputs)
    return Job.model_validate({"jobId": "j", "trainingInput": base})


def _full_cluster(**inputs: object) -> Job:
    return _job(workerType="n1-standard-4", workerCount="2", parameterServerType="n1-standard-4",
                parameterServerCount="1", evaluatorType="n1-standard-4", evaluatorCount="1", **inputs)


def _configs(job: Job, addresses: dict[str, list[str]] | None = None,
             trial: str | None = None) -> dict[str, dict[str, Any]]:
    assert job.training_input is not None
    groups = resolve_cluster(job.training_input, load_catalog())
    return tf_configs_for(job, groups, addresses, trial)


@pytest.mark.parametrize(
    ("inputs", "primary"),
    [
        ({"runtimeVersion": "1.15"}, "master"),
        ({"runtimeVersion": "2.11"}, "chief"),
        ({}, "master"),
        # The flag has no effect without a custom container (ml v1's useChiefInTfConfig), either way.
        ({"runtimeVersion": "1.15", "useChiefInTfConfig": True}, "master"),
        ({"runtimeVersion": "2.11", "useChiefInTfConfig": False}, "chief"),
        ({"masterConfig": {"imageUri": "gcr.io/p/trainer:1"}}, "master"),
        ({"masterConfig": {"imageUri": "gcr.io/p/trainer:1"}, "useChiefInTfConfig": True}, "chief"),
    ],
)
def test_primary_is_master_or_chief_by_runtime_and_flag(inputs: dict[str, object], primary: str) -> None:
    configs = _configs(_full_cluster(**inputs))
    other = {"master", "chief"} - {primary}
    for config in configs.values():
        assert primary in config["cluster"]
        assert not other & set(config["cluster"])
    assert configs["master-replica-0"]["task"] == {"type": primary, "index": 0}


def test_every_replica_gets_the_contract() -> None:
    job = _full_cluster(runtimeVersion="2.11")
    addresses = {"chief": ["localhost:1"], "worker": ["localhost:2", "localhost:3"], "ps": ["localhost:4"],
                 "evaluator": ["localhost:5"]}
    configs = _configs(job, addresses)
    assert set(configs) == {"master-replica-0", "worker-replica-0", "worker-replica-1", "ps-replica-0",
                            "evaluator-replica-0"}
    cluster = {"chief": ["localhost:1"], "worker": ["localhost:2", "localhost:3"], "ps": ["localhost:4"]}
    assert job.training_input is not None
    for name, config in configs.items():
        assert list(config) == ["cluster", "task", "job", "environment"]
        assert config["cluster"] == cluster  # the evaluator is never a member
        assert config["job"] == job.training_input.to_api()
        assert config["environment"] == "cloud"
        assert "trial" not in config["task"]
        kind, _, index = name.partition("-replica-")
        expected_type = {"master": "chief", "worker": "worker", "ps": "ps", "evaluator": "evaluator"}[kind]
        assert config["task"] == {"type": expected_type, "index": int(index)}


def test_trial_appears_only_for_tuning() -> None:
    configs = _configs(_job(runtimeVersion="2.11"), trial="3")
    assert configs["master-replica-0"]["task"] == {"type": "chief", "index": 0, "trial": "3"}


def test_dry_run_placeholders_without_addresses() -> None:
    configs = _configs(_full_cluster(runtimeVersion="2.11"))
    assert configs["worker-replica-1"]["cluster"]["worker"] == [PLACEHOLDER_ADDRESS] * 2


def test_missing_addresses_are_a_bug_not_a_silent_gap() -> None:
    with pytest.raises(ValueError, match="worker"):
        _configs(_full_cluster(runtimeVersion="2.11"), {"chief": ["localhost:1"]})


def test_basic_tier_has_a_lone_primary() -> None:
    job = Job.model_validate({"jobId": "j", "trainingInput": {"scaleTier": "BASIC", "region": "us-central1"}})
    configs = _configs(job)
    assert configs["master-replica-0"]["cluster"] == {"master": [PLACEHOLDER_ADDRESS]}


def test_cluster_spec_lists_every_pool_including_evaluators() -> None:
    job = _full_cluster(runtimeVersion="2.11")
    assert job.training_input is not None
    groups = resolve_cluster(job.training_input, load_catalog())
    addresses = {"chief": ["h:1"], "worker": ["h:2", "h:3"], "ps": ["h:4"], "evaluator": ["h:5"]}
    specs = cluster_specs_for(groups, addresses)
    assert specs["evaluator-replica-0"] == {
        "cluster": {"workerpool0": ["h:1"], "workerpool1": ["h:2", "h:3"], "workerpool2": ["h:4"],
                    "workerpool3": ["h:5"]},
        "environment": "cloud",
        "task": {"type": "workerpool3", "index": 0},
    }
    assert specs["worker-replica-1"]["task"] == {"type": "workerpool1", "index": 1}


def test_replica_environment() -> None:
    env = replica_environment(job_id="census_1", tf_config={"a": 1}, cluster_spec={"b": 2}, job_dir="/out/dir/")
    assert json.loads(env["TF_CONFIG"]) == {"a": 1}
    assert json.loads(env["CLUSTER_SPEC"]) == {"b": 2}
    assert env["AIP_MODEL_DIR"] == "/out/dir/model/"
    assert env["AIP_CHECKPOINT_DIR"] == "/out/dir/checkpoints/"
    assert env["AIP_TENSORBOARD_LOG_DIR"] == "/out/dir/logs/"
    assert env["CLOUD_ML_JOB_ID"] == "census_1"
    assert env["PYTHONUNBUFFERED"] == "1"
    assert "CLOUD_ML_TRIAL_ID" not in env
    bare = replica_environment(job_id="j", tf_config={}, cluster_spec={}, job_dir=None, trial="2")
    assert "AIP_MODEL_DIR" not in bare
    assert bare["CLOUD_ML_TRIAL_ID"] == "2"


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(12)
    assert len(set(ports)) == 12
    job = _full_cluster(runtimeVersion="2.11")
    assert job.training_input is not None
    groups = resolve_cluster(job.training_input, load_catalog())
    addresses = free_addresses(groups)
    flat = [address for group in addresses.values() for address in group]
    assert len(flat) == 5 and len(set(flat)) == 5


def test_start_port_layout_follows_gcloud() -> None:
    job = _full_cluster(runtimeVersion="2.11")
    assert job.training_input is not None
    groups = resolve_cluster(job.training_input, load_catalog())
    addresses = consecutive_addresses(groups, 27182)
    assert addresses == {"chief": ["localhost:27182"], "ps": ["localhost:27183"],
                         "worker": ["localhost:27184", "localhost:27185"], "evaluator": ["localhost:27186"]}


def test_pre_built_pytorch_replicas_get_torch_distributed_rendezvous_variables() -> None:
    from aiptrain._job.catalog import load_catalog
    from aiptrain._job.cluster import resolve_cluster
    from aiptrain._job.spec import TrainingInput
    from aiptrain._job.tf_config import pytorch_variables

    training_input = TrainingInput.model_validate({
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerType": "n1-standard-4", "workerCount": "2",
        "parameterServerType": "n1-standard-4", "parameterServerCount": "1"})
    groups = resolve_cluster(training_input, load_catalog())
    addresses = {"master": ["master-replica-0:2222"], "worker": ["worker-replica-0:2222", "worker-replica-1:2222"],
                 "ps": ["ps-replica-0:2222"]}
    found = pytorch_variables(groups, addresses)
    assert found["master-replica-0"] == {"WORLD_SIZE": "3", "RANK": "0", "MASTER_ADDR": "master-replica-0",
                                         "MASTER_PORT": "2222"}
    assert [found[f"worker-replica-{i}"]["RANK"] for i in (0, 1)] == ["1", "2"]
    assert "ps-replica-0" not in found  # PyTorch has no parameter servers
