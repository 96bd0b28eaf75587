"""The Vertex AI SDK (google-cloud-aiplatform) against a real `local serve`.

The SDK is pointed at the emulator the way docs/clients/vertex-sdk.md says: `api_endpoint` with
`http://`, a token credential. Its REST transport sends and asks for enums as numbers
(`$alt=json;enum-encoding=int`), so a job with a GPU and a tuning job both go through the integer
path; a plain HTTP request checks the names path and the answer's encoding.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aiptrain._packaging import build_package
from tests.fixtures.emulator import Emulator, make_trainer_project, running_emulator, wait_until
from tests.fixtures.sdk_over_grpc import run_over_grpc

aiplatform = pytest.importorskip("google.cloud.aiplatform")

PROJECT = "sdk-project"
LOCATION = "us-central1"
PACKAGE = "gs://sdk-bucket/packages/sdktrainer.tar.gz"
GPU_IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-11.py310:latest"
CPU_IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest"
# The losses each trial reports, in order: its last is 3.0, its best (lowest) 1.0.
LOSSES = (5.0, 1.0, 3.0)

SDK_TRAINER = textwrap.dedent(f'''
    """Prints what the SDK's job set up for it, and reports {LOSSES} as `loss` for tuning."""
    import json
    import os
    import sys
    import time

    print("pool-env=%s" % os.environ.get("POOL_SETTING"), flush=True)
    print("gpus=%s" % os.environ.get("CUDA_VISIBLE_DEVICES"), flush=True)
    print("args=%s" % " ".join(sys.argv[1:]), flush=True)
    metric_file = os.environ.get("CLOUD_ML_HP_METRIC_FILE")
    if metric_file:
        with open(metric_file, "a") as stream:
            for step, loss in enumerate({LOSSES!r}):
                stream.write(json.dumps({{"loss": loss, "global_step": step}}) + "\\n")
    if "--sleep" in sys.argv:
        print("sleeping", flush=True)
        time.sleep(float(sys.argv[sys.argv.index("--sleep") + 1]))
''')

NVIDIA_SMI = "#!/bin/sh\n[ \"$1\" = -L ] || exit 3\necho 'GPU 0: Tesla T4 (UUID: GPU-5d6f1c3a)'\n"


@pytest.fixture(scope="module")
def sdk_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    """An emulator whose machine has one (stand-in) T4, with the SDK's trainer staged."""
    root = tmp_path_factory.mktemp("vertex-sdk")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(NVIDIA_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    package = make_trainer_project(root / "project", SDK_TRAINER)
    sdist = build_package(package, cache_dir=root / "cache").path
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    with running_emulator(root / "home", env=env, grpc=True) as server:
        server.stage(sdist, PACKAGE)
        yield server


def init_sdk(emulator: Emulator, transport: str = "rest") -> None:
    """The lines docs/clients/vertex-sdk.md shows, for either transport."""
    from google.oauth2.credentials import Credentials

    if transport == "grpc":
        address, certificate = emulator.grpc
        # Read when the first TLS channel is made: nothing in this module makes one before.
        os.environ["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = str(certificate)
        aiplatform.init(project=PROJECT, location=LOCATION, api_endpoint=address, api_transport="grpc",
                        credentials=Credentials(token=emulator.token), staging_bucket="gs://sdk-bucket/staging")
        return
    aiplatform.init(project=PROJECT, location=LOCATION, api_endpoint=emulator.url.rstrip("/"),
                    api_transport=transport, credentials=Credentials(token=emulator.token),
                    staging_bucket="gs://sdk-bucket/staging")


def pools(image: str = CPU_IMAGE, *, gpu: bool = False, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    machine: dict[str, Any] = {"machine_type": "n1-standard-4"}
    if gpu:
        machine.update(accelerator_type="NVIDIA_TESLA_T4", accelerator_count=1)
    package: dict[str, Any] = {"executor_image_uri": image, "package_uris": [PACKAGE],
                               "python_module": "trainer.task", "args": ["--flag", "x"]}
    if env:
        package["env"] = [{"name": name, "value": value} for name, value in env.items()]
    return [{"machine_spec": machine, "replica_count": 1, "python_package_spec": package}]


def job_output(emulator: Emulator, engine_job_id: str) -> list[str]:
    return [entry.message for entry in emulator.engine().logs(PROJECT, engine_job_id)]


def test_custom_job_with_a_gpu_and_pool_env_runs_through_the_rest_transport(sdk_emulator: Emulator) -> None:
    init_sdk(sdk_emulator)
    job = aiplatform.CustomJob(display_name="sdk-gpu", worker_pool_specs=pools(GPU_IMAGE, gpu=True,
                                                                               env={"POOL_SETTING": "on"}),
                               base_output_dir="gs://sdk-bucket/out/gpu")
    job.run(sync=True)
    assert job.state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED
    fetched = aiplatform.CustomJob.get(job.resource_name)
    spec = fetched.job_spec.worker_pool_specs[0]
    assert spec.machine_spec.accelerator_type == aiplatform.gapic.AcceleratorType.NVIDIA_TESLA_T4
    assert [(e.name, e.value) for e in spec.python_package_spec.env] == [("POOL_SETTING", "on")]
    lines = job_output(sdk_emulator, f"customjob_{job.name}")
    assert "pool-env=on" in lines
    assert "gpus=0" in lines  # the stand-in T4, given to the chief
    assert "args=--flag x" in lines
    assert any(j.resource_name == job.resource_name for j in aiplatform.CustomJob.list())


def test_tuning_job_takes_each_trials_best_measurement_by_default(sdk_emulator: Emulator) -> None:
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    init_sdk(sdk_emulator)
    trial_job = aiplatform.CustomJob(display_name="sdk-trial", worker_pool_specs=pools(),
                                     base_output_dir="gs://sdk-bucket/out/hp")
    tuning = aiplatform.HyperparameterTuningJob(
        display_name="sdk-tuning", custom_job=trial_job, metric_spec={"loss": "minimize"},
        parameter_spec={"units": hpt.IntegerParameterSpec(min=1, max=4, scale="linear"),
                        "optimizer": hpt.CategoricalParameterSpec(values=["adam", "sgd"])},
        max_trial_count=2, parallel_trial_count=1)
    tuning.run(sync=True)
    assert tuning.state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED
    trials = tuning.trials
    assert len(trials) == 2
    for trial in trials:
        assert trial.state == aiplatform.gapic.Trial.State.SUCCEEDED
        assert trial.final_measurement.metrics[0].value == min(LOSSES)  # BEST_MEASUREMENT, the SDK's default
        names = {parameter.parameter_id for parameter in trial.parameters}
        assert names == {"units", "optimizer"}


def test_the_last_measurement_when_asked(sdk_emulator: Emulator) -> None:
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    init_sdk(sdk_emulator)
    trial_job = aiplatform.CustomJob(display_name="sdk-trial-last", worker_pool_specs=pools(),
                                     base_output_dir="gs://sdk-bucket/out/hp-last")
    tuning = aiplatform.HyperparameterTuningJob(
        display_name="sdk-tuning-last", custom_job=trial_job, metric_spec={"loss": "minimize"},
        parameter_spec={"units": hpt.IntegerParameterSpec(min=1, max=4, scale="linear")},
        max_trial_count=1, parallel_trial_count=1, measurement_selection="last")
    tuning.run(sync=True)
    assert [trial.final_measurement.metrics[0].value for trial in tuning.trials] == [LOSSES[-1]]


def test_enums_by_name_or_number_and_answers_in_the_encoding_asked(sdk_emulator: Emulator) -> None:
    url = f"{sdk_emulator.url}v1/projects/{PROJECT}/locations/{LOCATION}/customJobs"
    body: dict[str, Any] = {"displayName": "wire", "jobSpec": {"workerPoolSpecs": [{
        "machineSpec": {"machineType": "n1-standard-4", "acceleratorType": 5, "acceleratorCount": 1},
        "replicaCount": "1",
        "pythonPackageSpec": {"executorImageUri": GPU_IMAGE, "packageUris": [PACKAGE],
                              "pythonModule": "trainer.task"}}]}}
    headers = sdk_emulator.auth_headers()
    with httpx.Client(headers=headers, timeout=30) as http:
        named = http.post(url, json=body)
        assert named.status_code == 200, named.text
        assert named.json()["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] == "NVIDIA_TESLA_T4"
        assert isinstance(named.json()["state"], str)
        numbered = http.get(f"{sdk_emulator.url}v1/{named.json()['name']}",
                            params={"$alt": "json;enum-encoding=int"})
        assert numbered.status_code == 200, numbered.text
        assert numbered.json()["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] == 5
        assert isinstance(numbered.json()["state"], int)
        unknown = http.post(url, json={**body, "jobSpec": {"workerPoolSpecs": [{
            **body["jobSpec"]["workerPoolSpecs"][0],
            "machineSpec": {"machineType": "n1-standard-4", "acceleratorType": 999, "acceleratorCount": 1}}]}})
        assert unknown.status_code == 400
        field = unknown.json()["error"]["details"][0]["fieldViolations"][0]["field"]
        assert field == "custom_job.job_spec.worker_pool_specs[0].machine_spec.accelerator_type"
        duplicated = http.post(url, json={**body, "jobSpec": {"workerPoolSpecs": [{
            **body["jobSpec"]["workerPoolSpecs"][0],
            "pythonPackageSpec": {**body["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"],
                                  "env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}}]}})
        assert duplicated.status_code == 400
        assert "set twice" in duplicated.text
        http.post(f"{sdk_emulator.url}v1/{named.json()['name']}:cancel", json={})


# -- the custom training-job classes: trainingPipelines ------------------------------------------


def test_custom_python_package_training_job_runs_as_a_pipeline(sdk_emulator: Emulator) -> None:
    init_sdk(sdk_emulator)
    job = aiplatform.CustomPythonPackageTrainingJob(
        display_name="sdk-package-pipeline", python_package_gcs_uri=PACKAGE, python_module_name="trainer.task",
        container_uri=CPU_IMAGE)
    model = job.run(args=["--flag", "pipeline"], replica_count=1, machine_type="n1-standard-4",
                    base_output_dir="gs://sdk-bucket/out/pipeline", environment_variables={"POOL_SETTING": "p"})
    assert model is None  # no model to upload
    assert job.state == aiplatform.gapic.PipelineState.PIPELINE_STATE_SUCCEEDED
    backing = job.gca_resource.training_task_metadata["backingCustomJob"]
    assert "/customJobs/" in backing
    lines = job_output(sdk_emulator, f"customjob_{backing.rsplit('/', 1)[-1]}")
    assert "args=--flag pipeline" in lines
    assert "pool-env=p" in lines
    listed = [pipeline.resource_name for pipeline in aiplatform.CustomPythonPackageTrainingJob.list()]
    assert job.resource_name in listed


@pytest.mark.parametrize("transport", ["rest", "grpc"])
def test_cancelling_a_pipeline_cancels_its_backing_custom_job(sdk_emulator: Emulator, transport: str) -> None:
    init_sdk(sdk_emulator, transport)
    job = aiplatform.CustomPythonPackageTrainingJob(
        display_name=f"sdk-cancel-pipeline-{transport}", python_package_gcs_uri=PACKAGE,
        python_module_name="trainer.task", container_uri=CPU_IMAGE)
    job.run(args=["--sleep", "600"], replica_count=1, machine_type="n1-standard-4",
            base_output_dir=f"gs://sdk-bucket/out/cancel-{transport}", sync=False)
    job.wait_for_resource_creation()
    backing = aiplatform.CustomPythonPackageTrainingJob.get(job.resource_name).gca_resource.training_task_metadata[
        "backingCustomJob"]
    engine_id = f"customjob_{backing.rsplit('/', 1)[-1]}"
    wait_until(lambda: "sleeping" in job_output(sdk_emulator, engine_id), timeout=120, what="the trainer to start")
    assert aiplatform.CustomPythonPackageTrainingJob.get(job.resource_name).state == (
        aiplatform.gapic.PipelineState.PIPELINE_STATE_RUNNING)
    job.cancel()
    with pytest.raises(RuntimeError, match="Training failed"):
        job.wait()  # the SDK's run() raises for a pipeline that ended with an error: CANCELLED is one
    assert job.state == aiplatform.gapic.PipelineState.PIPELINE_STATE_CANCELLED
    assert aiplatform.CustomJob.get(backing).state == aiplatform.gapic.JobState.JOB_STATE_CANCELLED
    assert job.gca_resource.end_time is not None
    # The trainer's process went with it.
    replicas = sdk_emulator.engine().processes(PROJECT, engine_id).replicas
    assert replicas and all(not _alive(replica.pid) for replica in replicas)


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_pipeline_with_a_managed_dataset_or_automl_is_refused(sdk_emulator: Emulator) -> None:
    init_sdk(sdk_emulator)
    url = f"{sdk_emulator.url}v1/projects/{PROJECT}/locations/{LOCATION}/trainingPipelines"
    spec = {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                                 "pythonPackageSpec": {"executorImageUri": CPU_IMAGE, "packageUris": [PACKAGE],
                                                       "pythonModule": "trainer.task"}}]}
    body = {"displayName": "with-dataset",
            "trainingTaskDefinition": "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml",
            "trainingTaskInputs": spec, "inputDataConfig": {"datasetId": "123"}}
    with httpx.Client(headers=sdk_emulator.auth_headers(), timeout=30) as http:
        refused = http.post(url, json=body)
        assert refused.status_code == 400
        assert refused.json()["error"]["status"] == "FAILED_PRECONDITION"
        assert "Managed datasets" in refused.json()["error"]["message"]
        automl = http.post(url, json={**body, "inputDataConfig": None, "trainingTaskDefinition":
                                      "gs://google-cloud-aiplatform/schema/trainingjob/definition/automl_tabular_1.0.0.yaml"})
        assert automl.status_code == 400 and "custom training pipelines only" in automl.text
        missing = http.get(f"{url}/1234567890123456789")
        assert missing.status_code == 404
    # Nothing was created for the refused pipelines.
    assert [p.display_name for p in aiplatform.CustomPythonPackageTrainingJob.list()
            if p.display_name in ("with-dataset",)] == []


def test_custom_training_job_stages_its_script_through_gcs(tmp_path: Path, fake_gcs: Any) -> None:
    """The SDK packages a script and uploads it to the staging bucket itself: with
    STORAGE_EMULATOR_HOST the emulator fetches it from that GCS emulator, as Vertex reads GCS."""
    bucket = fake_gcs.make_bucket()
    script = tmp_path / "task.py"
    script.write_text("import sys\nprint('script ran with', ' '.join(sys.argv[1:]), flush=True)\n")
    with running_emulator(tmp_path / "home", env={"STORAGE_EMULATOR_HOST": fake_gcs.endpoint}) as server:
        old = os.environ.get("STORAGE_EMULATOR_HOST")
        os.environ["STORAGE_EMULATOR_HOST"] = fake_gcs.endpoint
        try:
            from google.oauth2.credentials import Credentials

            aiplatform.init(project=PROJECT, location=LOCATION, api_endpoint=server.url.rstrip("/"),
                            api_transport="rest", credentials=Credentials(token=server.token),
                            staging_bucket=f"{bucket}/staging")
            job = aiplatform.CustomTrainingJob(display_name="sdk-script", script_path=str(script),
                                               container_uri=CPU_IMAGE)
            job.run(args=["--epochs", "1"], replica_count=1, machine_type="n1-standard-4",
                    base_output_dir=f"{bucket}/out")
        finally:
            if old is None:
                os.environ.pop("STORAGE_EMULATOR_HOST", None)
            else:
                os.environ["STORAGE_EMULATOR_HOST"] = old
        assert job.state == aiplatform.gapic.PipelineState.PIPELINE_STATE_SUCCEEDED
        backing = job.gca_resource.training_task_metadata["backingCustomJob"].rsplit("/", 1)[-1]
        lines = [entry.message for entry in server.engine().logs(PROJECT, f"customjob_{backing}")]
        assert "script ran with --epochs 1" in lines


def test_custom_training_job_stages_its_script_through_gcs_over_grpc(tmp_path: Path, fake_gcs: Any) -> None:
    """The same over gRPC, in a process of its own: this emulator has its own certificate, which a
    process that already trusted another one cannot take (tests/fixtures/sdk_over_grpc.py)."""
    bucket = fake_gcs.make_bucket()
    script = tmp_path / "task.py"
    script.write_text("import sys\nprint('grpc script ran with', ' '.join(sys.argv[1:]), flush=True)\n")
    gcs_env = {"STORAGE_EMULATOR_HOST": fake_gcs.endpoint}
    with running_emulator(tmp_path / "home", env=gcs_env, grpc=True) as server:
        report = run_over_grpc(server, "script_job", {
            "project": PROJECT, "location": LOCATION, "staging_bucket": f"{bucket}/staging",
            "display_name": "sdk-script-grpc", "script": str(script), "image": CPU_IMAGE,
            "args": ["--epochs", "2"], "base_output_dir": f"{bucket}/out"}, env=gcs_env)
        assert report["model"] is None
        assert report["state"] == "PIPELINE_STATE_SUCCEEDED"
        assert report["backing_state"] == "JOB_STATE_SUCCEEDED"
        assert report["image_uri"] == CPU_IMAGE
        assert report["listed"]
        backing = report["backing"].rsplit("/", 1)[-1]
        lines = [entry.message for entry in server.engine().logs(PROJECT, f"customjob_{backing}")]
        assert "grpc script ran with --epochs 2" in lines


# -- the SDK's default transport: gRPC ------------------------------------------------------------


def test_the_grpc_transport_runs_a_custom_job_a_tuning_job_and_a_pipeline(sdk_emulator: Emulator) -> None:
    from google.api_core.exceptions import InvalidArgument, NotFound, Unauthenticated
    from google.cloud.aiplatform import hyperparameter_tuning as hpt
    from google.oauth2.credentials import Credentials

    init_sdk(sdk_emulator, "grpc")
    job = aiplatform.CustomJob(display_name="grpc-gpu", worker_pool_specs=pools(GPU_IMAGE, gpu=True,
                                                                                env={"POOL_SETTING": "grpc"}),
                               base_output_dir="gs://sdk-bucket/out/grpc")
    job.run(sync=True)
    assert job.state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED
    assert "pool-env=grpc" in job_output(sdk_emulator, f"customjob_{job.name}")
    assert job.resource_name in [listed.resource_name for listed in aiplatform.CustomJob.list()]

    trial_job = aiplatform.CustomJob(display_name="grpc-trial", worker_pool_specs=pools(),
                                     base_output_dir="gs://sdk-bucket/out/grpc-hp")
    tuning = aiplatform.HyperparameterTuningJob(
        display_name="grpc-tuning", custom_job=trial_job, metric_spec={"loss": "minimize"},
        parameter_spec={"units": hpt.IntegerParameterSpec(min=1, max=4, scale="linear")},
        max_trial_count=1, parallel_trial_count=1)
    tuning.run(sync=True)
    assert [trial.final_measurement.metrics[0].value for trial in tuning.trials] == [min(LOSSES)]

    pipeline = aiplatform.CustomPythonPackageTrainingJob(
        display_name="grpc-pipeline", python_package_gcs_uri=PACKAGE, python_module_name="trainer.task",
        container_uri=CPU_IMAGE)
    pipeline.run(replica_count=1, machine_type="n1-standard-4", base_output_dir="gs://sdk-bucket/out/grpc-p")
    assert pipeline.state == aiplatform.gapic.PipelineState.PIPELINE_STATE_SUCCEEDED

    # Errors come back as gRPC statuses with the REST route's message and field.
    with pytest.raises(NotFound):
        aiplatform.CustomJob.get(f"projects/{PROJECT}/locations/{LOCATION}/customJobs/1234567890123456789")
    twice = aiplatform.CustomJob(display_name="grpc-env-twice", worker_pool_specs=pools(
        env={"A": "1"}), base_output_dir="gs://sdk-bucket/out/twice")
    twice.job_spec.worker_pool_specs[0].python_package_spec.env.append({"name": "A", "value": "2"})
    with pytest.raises(InvalidArgument, match="set twice"):
        twice.run(sync=True)
    address, _ = sdk_emulator.grpc
    aiplatform.init(project=PROJECT, location=LOCATION, api_endpoint=address, api_transport="grpc",
                    credentials=Credentials(token="not-the-token"))
    with pytest.raises(Unauthenticated):
        aiplatform.CustomJob.list()
