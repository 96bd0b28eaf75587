"""ml v1 Job -> Vertex AI CustomJob, against hand-written expected bodies, and back."""

from __future__ import annotations

from typing import Any

import pytest

from aiptrain._backends.vertex.translate import (
    VERTEX_TO_ML_STATE,
    custom_job_to_job,
    job_to_custom_job,
    vertex_problems,
)
from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import JobState, parse_job
from aiptrain.errors import ValidationFailed

CPU = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-8:latest"
GPU = "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-8:latest"
PACKAGE = "gs://bucket/packages/abc/trainer-0.1.tar.gz"


def job(**training_input: Any) -> Any:
    base = {"runtimeVersion": "2.8", "region": "us-central1", "packageUris": [PACKAGE],
            "pythonModule": "trainer.task"}
    return parse_job({"jobId": "my_job", "trainingInput": {**base, **training_input}})


def translate(**training_input: Any) -> dict[str, Any]:
    return job_to_custom_job(job(**training_input), load_catalog())


def program(image: str = CPU, args: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"executorImageUri": image, "packageUris": [PACKAGE], "pythonModule": "trainer.task"}
    if args is not None:
        spec["args"] = args
    return spec


def test_basic() -> None:
    assert translate(scaleTier="BASIC") == {
        "displayName": "my_job",
        "jobSpec": {"workerPoolSpecs": [
            {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
             "pythonPackageSpec": program()},
        ]},
    }


def test_no_scale_tier_means_basic() -> None:
    assert translate() == translate(scaleTier="BASIC")


def test_standard_1() -> None:
    assert translate(scaleTier="STANDARD_1")["jobSpec"]["workerPoolSpecs"] == [
        {"machineSpec": {"machineType": "n1-highcpu-8"}, "replicaCount": "1", "pythonPackageSpec": program()},
        {"machineSpec": {"machineType": "n1-highcpu-8"}, "replicaCount": "4", "pythonPackageSpec": program()},
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "3", "pythonPackageSpec": program()},
    ]


def test_premium_1() -> None:
    assert translate(scaleTier="PREMIUM_1")["jobSpec"]["workerPoolSpecs"] == [
        {"machineSpec": {"machineType": "n1-highcpu-16"}, "replicaCount": "1", "pythonPackageSpec": program()},
        {"machineSpec": {"machineType": "n1-highcpu-16"}, "replicaCount": "19", "pythonPackageSpec": program()},
        {"machineSpec": {"machineType": "n1-highmem-8"}, "replicaCount": "11", "pythonPackageSpec": program()},
    ]


def test_basic_gpu_gets_the_gpu_image() -> None:
    assert translate(scaleTier="BASIC_GPU")["jobSpec"]["workerPoolSpecs"] == [
        {"machineSpec": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_K80",
                         "acceleratorCount": 1},
         "replicaCount": "1", "pythonPackageSpec": program(GPU)},
    ]


def test_basic_tpu() -> None:
    assert translate(scaleTier="BASIC_TPU")["jobSpec"]["workerPoolSpecs"] == [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "pythonPackageSpec": program()},
        {"machineSpec": {"machineType": "cloud-tpu", "acceleratorType": "TPU_V2", "acceleratorCount": 8},
         "replicaCount": "1", "pythonPackageSpec": program()},
    ]


def test_custom_with_accelerators_job_dir_and_everything_mappable() -> None:
    body = job_to_custom_job(parse_job({
        "jobId": "full_job",
        "labels": {"team": "nlp"},
        "trainingInput": {
            "scaleTier": "CUSTOM",
            "masterType": "n1-standard-8",
            "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"},
                             "diskConfig": {"bootDiskType": "pd-standard", "bootDiskSizeGb": 200}},
            "workerType": "n1-standard-16",
            "workerCount": "2",
            "workerConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_V100", "count": "2"}},
            "parameterServerType": "n1-highmem-8",
            "parameterServerCount": "1",
            "runtimeVersion": "2.8",
            "region": "us-central1",
            "packageUris": [PACKAGE],
            "pythonModule": "trainer.task",
            "args": ["--epochs", "3"],
            "jobDir": "gs://bucket/out",
            "scheduling": {"maxRunningTime": "7200s"},
            "serviceAccount": "trainer@p.iam.gserviceaccount.com",
            "network": "projects/123/global/networks/default",
            "encryptionConfig": {"kmsKeyName": "projects/p/locations/us-central1/keyRings/k/cryptoKeys/n"},
            "enableWebAccess": True,
            "useChiefInTfConfig": True,
        },
    }), load_catalog())
    args = ["--epochs", "3", "--job-dir=gs://bucket/out"]
    assert body == {
        "displayName": "full_job",
        "labels": {"team": "nlp"},
        "encryptionSpec": {"kmsKeyName": "projects/p/locations/us-central1/keyRings/k/cryptoKeys/n"},
        "jobSpec": {
            "workerPoolSpecs": [
                {"machineSpec": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4",
                                 "acceleratorCount": 1},
                 "replicaCount": "1",
                 "pythonPackageSpec": program(GPU, args),
                 "diskSpec": {"bootDiskType": "pd-standard", "bootDiskSizeGb": 200}},
                {"machineSpec": {"machineType": "n1-standard-16", "acceleratorType": "NVIDIA_TESLA_V100",
                                 "acceleratorCount": 2},
                 "replicaCount": "2",
                 "pythonPackageSpec": program(GPU, args)},
                {"machineSpec": {"machineType": "n1-highmem-8"}, "replicaCount": "1",
                 "pythonPackageSpec": program(CPU, args)},
            ],
            "baseOutputDirectory": {"outputUriPrefix": "gs://bucket/out"},
            "scheduling": {"timeout": "7200s"},
            "serviceAccount": "trainer@p.iam.gserviceaccount.com",
            "network": "projects/123/global/networks/default",
            "enableWebAccess": True,
        },
    }


def test_legacy_machine_types_become_compute_engine_with_their_gpus() -> None:
    pools = translate(scaleTier="CUSTOM", masterType="complex_model_m_gpu", workerType="standard_p100",
                      workerCount="3", parameterServerType="large_model",
                      parameterServerCount="2")["jobSpec"]["workerPoolSpecs"]
    assert pools == [
        {"machineSpec": {"machineType": "n1-standard-16", "acceleratorType": "NVIDIA_TESLA_K80",
                         "acceleratorCount": 4},
         "replicaCount": "1", "pythonPackageSpec": program(GPU)},
        {"machineSpec": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_P100",
                         "acceleratorCount": 1},
         "replicaCount": "3", "pythonPackageSpec": program(GPU)},
        {"machineSpec": {"machineType": "n1-highmem-8"}, "replicaCount": "2", "pythonPackageSpec": program()},
    ]


def test_evaluators_without_workers_keep_inner_empty_pools() -> None:
    pools = translate(scaleTier="CUSTOM", masterType="n1-standard-4", evaluatorType="n1-standard-8",
                      evaluatorCount="1")["jobSpec"]["workerPoolSpecs"]
    assert pools == [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "pythonPackageSpec": program()},
        {},
        {},
        {"machineSpec": {"machineType": "n1-standard-8"}, "replicaCount": "1", "pythonPackageSpec": program()},
    ]


def test_trailing_empty_pools_are_trimmed() -> None:
    pools = translate(scaleTier="CUSTOM", masterType="n1-standard-4", workerType="n1-standard-4",
                      workerCount="0")["jobSpec"]["workerPoolSpecs"]
    assert len(pools) == 1


def test_custom_container_pools_inherit_the_master_image() -> None:
    body = job_to_custom_job(parse_job({"jobId": "c", "trainingInput": {
        "scaleTier": "CUSTOM", "region": "us-central1", "masterType": "n1-standard-4",
        "masterConfig": {"imageUri": "gcr.io/p/trainer:1", "containerCommand": ["python", "-m", "t"],
                         "containerArgs": ["--x", "1"]},
        "workerType": "n1-standard-4", "workerCount": "1",
        "useChiefInTfConfig": True,
    }}), load_catalog())
    assert body["jobSpec"]["workerPoolSpecs"] == [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
         "containerSpec": {"imageUri": "gcr.io/p/trainer:1", "command": ["python", "-m", "t"],
                           "args": ["--x", "1"]}},
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
         "containerSpec": {"imageUri": "gcr.io/p/trainer:1"}},
    ]


def test_container_gets_training_input_args_with_the_job_dir() -> None:
    body = job_to_custom_job(parse_job({"jobId": "c", "trainingInput": {
        "region": "us-central1", "masterConfig": {"imageUri": "gcr.io/p/t:1"}, "args": ["--a"],
        "jobDir": "gs://b/d"}}), load_catalog())
    assert body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"] == {
        "imageUri": "gcr.io/p/t:1", "args": ["--a", "--job-dir=gs://b/d"]}


def problem_paths(data: dict[str, Any]) -> list[str]:
    return [p.path for p in vertex_problems(parse_job(data), load_catalog())]


def test_unmappable_fields_are_refused_with_paths() -> None:
    data = {"jobId": "j", "trainingInput": {
        "runtimeVersion": "1.15", "pythonVersion": "2.7", "region": "us-central1",
        "packageUris": [PACKAGE], "pythonModule": "t.task",
        "scheduling": {"priority": 5, "maxWaitTime": "3600s"},
        "hyperparameters": {"goal": "MAXIMIZE", "maxTrials": 2, "params": [], "resumePreviousJobId": "old"},
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4",
        "workerType": "cloud_tpu", "workerCount": "1",
        "workerConfig": {"acceleratorConfig": {"type": "TPU_V3_POD", "count": "32"}, "tpuTfVersion": "2.8"},
    }}
    assert problem_paths(data) == [
        "trainingInput.hyperparameters.resumePreviousJobId",
        "trainingInput.scheduling.priority",
        "trainingInput.scheduling.maxWaitTime",
        "trainingInput.pythonVersion",
        "trainingInput.workerConfig.tpuTfVersion",
        "trainingInput.workerConfig.acceleratorConfig.type",
    ]
    with pytest.raises(ValidationFailed) as raised:
        job_to_custom_job(parse_job(data), load_catalog())
    assert "cannot continue an earlier job" in str(raised.value)
    assert all(p.hint for p in raised.value.problems)


def test_runtime_without_a_vertex_image_is_refused_with_a_suggestion() -> None:
    problems = vertex_problems(job(runtimeVersion="1.14"), load_catalog())
    assert [p.path for p in problems] == ["trainingInput.runtimeVersion"]
    assert "custom container" in (problems[0].hint or "")
    assert "2.8" in (problems[0].hint or "")


def test_missing_runtime_version_is_refused() -> None:
    data = {"jobId": "j", "trainingInput": {"region": "us-central1", "packageUris": [PACKAGE],
                                            "pythonModule": "t.task"}}
    assert problem_paths(data) == ["trainingInput.runtimeVersion"]


def test_python_3_version_is_accepted() -> None:
    assert vertex_problems(job(pythonVersion="3.7"), load_catalog()) == []


def test_use_chief_false_only_matters_for_containers() -> None:
    assert vertex_problems(job(useChiefInTfConfig=False), load_catalog()) == []
    container = {"jobId": "j", "trainingInput": {"region": "us-central1", "useChiefInTfConfig": False,
                                                 "masterConfig": {"imageUri": "gcr.io/p/t:1"}}}
    assert problem_paths(container) == ["trainingInput.useChiefInTfConfig"]


def test_tier_accelerator_path_names_the_tier() -> None:
    # A tier whose accelerator has no Vertex name would be refused at scaleTier; none does today.
    assert vertex_problems(job(scaleTier="BASIC_TPU"), load_catalog()) == []


# -- reverse ------------------------------------------------------------------------------------


def test_round_trip_of_a_custom_job() -> None:
    original = parse_job({"jobId": "rt", "labels": {"a": "b"}, "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-8",
        "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}},
        "workerType": "n1-standard-4", "workerCount": "2",
        "evaluatorType": "n1-standard-4", "evaluatorCount": "1",
        "runtimeVersion": "2.8", "region": "europe-west4", "packageUris": [PACKAGE],
        "pythonModule": "trainer.task", "args": ["--steps", "10"], "jobDir": "gs://b/out",
        "scheduling": {"maxRunningTime": "3600s"}}})
    body = job_to_custom_job(original, load_catalog())
    served = {**body, "name": "projects/p/locations/europe-west4/customJobs/42", "state": "JOB_STATE_PENDING",
              "createTime": "2024-01-02T03:04:05.123456Z", "error": {"code": 3, "message": "boom"}}
    back = custom_job_to_job(served, load_catalog())
    assert back.to_api() == {
        "jobId": "rt",
        "labels": {"a": "b"},
        "state": "PREPARING",
        "createTime": "2024-01-02T03:04:05.123456Z",
        "errorMessage": "boom",
        "trainingInput": {
            "scaleTier": "CUSTOM",
            "masterType": "n1-standard-8",
            "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}},
            "workerType": "n1-standard-4", "workerCount": "2",
            "evaluatorType": "n1-standard-4", "evaluatorCount": "1",
            "packageUris": [PACKAGE], "pythonModule": "trainer.task", "args": ["--steps", "10"],
            "region": "europe-west4", "jobDir": "gs://b/out", "runtimeVersion": "2.8",
            "scheduling": {"maxRunningTime": "3600s"},
            "useChiefInTfConfig": True,
        },
    }


def test_reverse_of_tpu_and_container_pools() -> None:
    back = custom_job_to_job({"displayName": "x", "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
         "containerSpec": {"imageUri": "gcr.io/p/t:1", "args": ["--a"]}},
        {"machineSpec": {"machineType": "cloud-tpu", "acceleratorType": "TPU_V2", "acceleratorCount": 8},
         "replicaCount": "1", "containerSpec": {"imageUri": "gcr.io/p/t:1"}},
        {"machineSpec": {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_L4", "acceleratorCount": 1},
         "replicaCount": "1", "containerSpec": {"imageUri": "gcr.io/p/t:1"}},
    ]}}, load_catalog())
    ti = back.training_input
    assert ti is not None and ti.master_config is not None and ti.worker_config is not None
    assert ti.master_config.image_uri == "gcr.io/p/t:1"
    assert ti.master_config.container_args == ["--a"]
    assert ti.worker_type == "cloud_tpu"
    assert ti.worker_config.accelerator_config is not None
    assert ti.worker_config.accelerator_config.type == "TPU_V2"
    # NVIDIA_L4 has no ml v1 name: the machine is shown, the accelerator is not invented.
    assert ti.parameter_server_config is not None
    assert ti.parameter_server_config.accelerator_config is None


@pytest.mark.parametrize(("vertex", "ml"), [
    ("JOB_STATE_QUEUED", "QUEUED"), ("JOB_STATE_PENDING", "PREPARING"), ("JOB_STATE_RUNNING", "RUNNING"),
    ("JOB_STATE_SUCCEEDED", "SUCCEEDED"), ("JOB_STATE_FAILED", "FAILED"),
    ("JOB_STATE_CANCELLING", "CANCELLING"), ("JOB_STATE_CANCELLED", "CANCELLED"),
    ("JOB_STATE_PAUSED", "QUEUED"), ("JOB_STATE_EXPIRED", "FAILED"), ("JOB_STATE_UPDATING", "RUNNING"),
    ("JOB_STATE_PARTIALLY_SUCCEEDED", "FAILED"), ("JOB_STATE_UNSPECIFIED", "STATE_UNSPECIFIED"),
])
def test_state_map(vertex: str, ml: str) -> None:
    assert VERTEX_TO_ML_STATE[vertex] == JobState(ml)
    assert custom_job_to_job({"displayName": "s", "state": vertex}).state == JobState(ml)


def test_every_vertex_state_in_the_discovery_document_is_mapped() -> None:
    from aiptrain._emulator.discovery import discovery_document

    enum = discovery_document("aiplatform", "v1")["schemas"]["GoogleCloudAiplatformV1CustomJob"][
        "properties"]["state"]["enum"]
    assert set(enum) == set(VERTEX_TO_ML_STATE)


def test_translated_bodies_satisfy_the_aiplatform_schema() -> None:
    from aiptrain._emulator.discovery import discovery_document
    from aiptrain._emulator.schema import SchemaValidator

    validator = SchemaValidator(discovery_document("aiplatform", "v1"))
    for tier in ("BASIC", "STANDARD_1", "PREMIUM_1", "BASIC_GPU", "BASIC_TPU"):
        body = translate(scaleTier=tier, jobDir="gs://b/o", scheduling={"maxRunningTime": "60s"})
        cleaned, violations = validator.validate(body, "GoogleCloudAiplatformV1CustomJob", "custom_job")
        assert violations == []
        assert cleaned == body


def test_a_python_package_on_a_pre_built_executor_image_keeps_its_image() -> None:
    def back(image: str) -> Any:
        pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                "pythonPackageSpec": program(image)}
        return custom_job_to_job({"displayName": "p", "jobSpec": {"workerPoolSpecs": [pool]}}, load_catalog())

    pytorch = back("us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.1-4:latest").training_input
    assert pytorch.master_config.image_uri == "us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.1-4:latest"
    assert pytorch.python_module == "trainer.task" and pytorch.runtime_version is None
    # A TensorFlow executor image is its runtime version, in any of its regions' registries.
    tensorflow = back("europe-docker.pkg.dev/vertex-ai/training/tf-cpu.2-1:latest").training_input
    assert tensorflow.runtime_version == "2.1" and tensorflow.master_config is None


def test_a_module_on_a_pre_built_image_is_a_python_package_on_that_executor_image() -> None:
    image = "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.1-10:latest"
    pools = translate(runtimeVersion=None, masterConfig={"imageUri": image}, args=["--epochs", "2"])[
        "jobSpec"]["workerPoolSpecs"]
    assert pools == [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                      "pythonPackageSpec": program(image, ["--epochs", "2"])}]


def test_a_pools_env_survives_the_way_back_and_forth() -> None:
    catalog = load_catalog()
    package = {"executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest",
               "packageUris": ["gs://bucket/t.tar.gz"], "pythonModule": "trainer.task"}
    custom_job = {"displayName": "env", "name": "projects/p/locations/us-central1/customJobs/1", "jobSpec": {
        "workerPoolSpecs": [
            {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
             "pythonPackageSpec": {**package, "env": [{"name": "ROLE", "value": "chief"}]}},
            {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "2",
             "pythonPackageSpec": {**package, "env": [{"name": "ROLE", "value": "worker"}]}}]}}
    job = custom_job_to_job(custom_job, catalog)
    assert job.training_input is not None
    assert job.training_input.master_config is not None and job.training_input.worker_config is not None
    assert job.training_input.master_config.env == {"ROLE": "chief"}
    assert job.training_input.worker_config.env == {"ROLE": "worker"}
    pools = job_to_custom_job(job, catalog)["jobSpec"]["workerPoolSpecs"]
    assert [pool["pythonPackageSpec"].get("env") for pool in pools] == [
        [{"name": "ROLE", "value": "chief"}], [{"name": "ROLE", "value": "worker"}]]


def _pool_image(body: dict[str, Any]) -> str:
    image: str = body["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["executorImageUri"]
    return image


def test_the_image_whose_python_is_the_runtimes_and_a_warning_when_python_changes() -> None:
    from aiptrain._backends.vertex.translate import python_change_warning

    catalog = load_catalog()
    keeps = job(runtimeVersion="2.11", pythonVersion="3.7")
    assert _pool_image(job_to_custom_job(keeps, catalog)) == "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11:latest"
    assert python_change_warning(keeps, catalog) is None
    assert python_change_warning(job(runtimeVersion="2.11"), catalog) is None  # its default Python, 3.7
    changes = job(runtimeVersion="1.15")  # its default Python was 2.7; Vertex AI's 1.15 images run 3.7
    assert _pool_image(job_to_custom_job(changes, catalog)) == "us-docker.pkg.dev/vertex-ai/training/tf-cpu.1-15:latest"
    warning = python_change_warning(changes, catalog)
    assert warning is not None and "Python 3.7, not 2.7" in warning


def test_a_py310_image_still_reads_back_as_its_runtime() -> None:
    package = {"executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-11.py310:latest",
               "packageUris": ["gs://bucket/t.tar.gz"], "pythonModule": "trainer.task"}
    back = custom_job_to_job({"displayName": "x", "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "pythonPackageSpec": package}]}})
    assert back.training_input is not None and back.training_input.runtime_version == "2.11"


def test_dry_run_on_the_vertex_backend_warns_of_the_python_change(tmp_path: Any) -> None:
    import json

    from click.testing import CliRunner

    from aiptrain._cli.main import root

    package = tmp_path / "trainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text("print('hi')\n")
    base = ["jobs", "submit", "training", "py_job", "--backend", "vertex", "--project", "vertex-project",
            "--region", "us-central1", "--package-path", str(package), "--module-name", "trainer.task",
            "--staging-bucket", "gs://my-bucket", "--dry-run", "--format", "json"]
    result = CliRunner().invoke(root, [*base, "--runtime-version", "1.15"])
    assert result.exit_code == 0, result.stderr
    assert any("runs Python 3.7, not 2.7" in warning for warning in json.loads(result.stdout)["warnings"])
    result = CliRunner().invoke(root, [*base, "--runtime-version", "2.11"])
    assert result.exit_code == 0, result.stderr
    assert not any("Python" in warning for warning in json.loads(result.stdout)["warnings"])
