"""TF_CONFIG as the service writes it -> this replica's role, and the TF_CONFIG TensorFlow gets."""

from __future__ import annotations

import json

import pytest

SERVICE_CLUSTER = {
    "master": ["localhost:1000"],
    "worker": ["localhost:1001", "localhost:1002"],
}


def service_tf_config(task_type: str, index: int, cluster: dict[str, list[str]] | None = None) -> str:
    return json.dumps({
        "cluster": cluster if cluster is not None else SERVICE_CLUSTER,
        "task": {"type": task_type, "index": index, "trial": "3"},
        "job": {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerCount": "2"},
        "environment": "cloud",
    })


def test_no_tf_config_means_single_replica_chief(template_module):
    cluster = template_module("cluster")
    role = cluster.parse_tf_config(None)
    assert role.mode == cluster.SINGLE
    assert role.is_primary and role.label == "chief:0"
    assert role.tf_config_for_tensorflow() is None


def test_service_master_becomes_chief_and_extra_keys_are_dropped(template_module):
    cluster = template_module("cluster")
    role = cluster.parse_tf_config(service_tf_config("master", 0))
    assert role.mode == cluster.MULTI_WORKER
    assert role.task_type == "chief" and role.is_primary
    assert role.trial == "3"
    assert role.num_workers == 3
    for_tf = json.loads(role.tf_config_for_tensorflow())
    assert for_tf == {
        "cluster": {"chief": ["localhost:1000"], "worker": ["localhost:1001", "localhost:1002"]},
        "task": {"type": "chief", "index": 0},
    }


def test_workers_are_not_primary(template_module):
    cluster = template_module("cluster")
    role = cluster.parse_tf_config(service_tf_config("worker", 1))
    assert role.label == "worker:1" and not role.is_primary


def test_worker_zero_is_primary_without_a_chief(template_module):
    cluster = template_module("cluster")
    role = cluster.parse_tf_config(service_tf_config("worker", 0, {"worker": ["a:1", "b:2"]}))
    assert role.mode == cluster.MULTI_WORKER and role.is_primary


def test_parameter_servers_select_parameter_server_training(template_module):
    cluster = template_module("cluster")
    spec = {**SERVICE_CLUSTER, "ps": ["localhost:1003"]}
    role = cluster.parse_tf_config(service_tf_config("ps", 0, spec))
    assert role.mode == cluster.PARAMETER_SERVER and not role.is_primary
    assert role.num_workers == 2
    assert json.loads(role.tf_config_for_tensorflow())["cluster"]["chief"] == ["localhost:1000"]


def test_evaluator_is_outside_the_cluster(template_module):
    cluster = template_module("cluster")
    listed = {**SERVICE_CLUSTER, "evaluator": ["localhost:1009"]}
    role = cluster.parse_tf_config(service_tf_config("evaluator", 0, listed))
    assert role.mode == cluster.EVALUATION and not role.is_primary
    assert "evaluator" not in role.cluster
    assert role.tf_config_for_tensorflow() is None


def test_one_replica_cluster_is_plain_local_training(template_module):
    cluster = template_module("cluster")
    role = cluster.parse_tf_config(service_tf_config("master", 0, {"master": ["localhost:1000"]}))
    assert role.mode == cluster.SINGLE and role.is_primary
    assert role.tf_config_for_tensorflow() is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"cluster": {"chief": ["a:1"], "ps": ["b:2"]}, "task": {"type": "chief"}}), "no workers"),
        (json.dumps({"cluster": {"worker": ["a:1"], "ps": ["b:2"]}, "task": {"type": "worker"}}), "needs a chief"),
        (json.dumps({"cluster": {"chief": ["a:1"], "worker": ["b:2"]}, "task": {"type": "worker", "index": 4}}),
         "not in the TF_CONFIG cluster"),
        (json.dumps({"cluster": {"chief": ["a:1"], "master": ["b:2"]}, "task": {"type": "chief"}}), "twice"),
    ],
)
def test_unusable_tf_config_is_refused(template_module, text, message):
    cluster = template_module("cluster")
    with pytest.raises(cluster.ClusterConfigError, match=message):
        cluster.parse_tf_config(text)


def test_expose_to_tensorflow_rewrites_the_environment(template_module):
    cluster = template_module("cluster")
    environ = {"TF_CONFIG": service_tf_config("worker", 0, {**SERVICE_CLUSTER, "ps": ["localhost:1003"]})}
    role = cluster.role_from_environment(environ)
    cluster.expose_to_tensorflow(role, environ)
    assert json.loads(environ["TF_CONFIG"])["task"] == {"type": "worker", "index": 0}
    assert environ["GRPC_FAIL_FAST"] == "use_caller"

    single = {"TF_CONFIG": service_tf_config("master", 0, {"master": ["localhost:1000"]})}
    cluster.expose_to_tensorflow(cluster.role_from_environment(single), single)
    assert "TF_CONFIG" not in single
