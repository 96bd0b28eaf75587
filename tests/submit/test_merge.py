"""The --config / flag merge: flags win, and gcloud's harmful quirks are fixed."""

from __future__ import annotations

from aiptrain._submit.submission import Accelerator, SubmitOptions, merge_job

CONFIG = {
    "jobId": "from_config",
    "labels": {"team": "ml", "env": "dev"},
    "trainingInput": {
        "scaleTier": "CUSTOM",
        "masterType": "n1-standard-4",
        "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"},
                         "diskConfig": {"bootDiskSizeGb": 200}},
        "region": "europe-west4",
        "packageUris": ["gs://deps/dep-1.0.tar.gz"],
        "enableWebAccess": True,
        "args": ["--from-config"],
    },
}


def test_positional_job_id_wins() -> None:
    assert merge_job(SubmitOptions(job_id="cli_id"), CONFIG)["jobId"] == "cli_id"


def test_config_region_is_kept_and_flag_wins() -> None:
    assert merge_job(SubmitOptions(job_id="j"), CONFIG)["trainingInput"]["region"] == "europe-west4"
    merged = merge_job(SubmitOptions(job_id="j", region="us-central1"), CONFIG)
    assert merged["trainingInput"]["region"] == "us-central1"


def test_default_region_only_fills_a_gap() -> None:
    assert merge_job(SubmitOptions(job_id="j", default_region="us-east1"), CONFIG)["trainingInput"]["region"] == (
        "europe-west4")
    assert merge_job(SubmitOptions(job_id="j", default_region="us-east1"), None)["trainingInput"]["region"] == (
        "us-east1")


def test_config_package_uris_and_web_access_survive() -> None:
    ti = merge_job(SubmitOptions(job_id="j"), CONFIG)["trainingInput"]
    assert ti["packageUris"] == ["gs://deps/dep-1.0.tar.gz"]
    assert ti["enableWebAccess"] is True
    assert "enableWebAccess" not in merge_job(SubmitOptions(job_id="j"), None)["trainingInput"]


def test_labels_merge_per_key() -> None:
    merged = merge_job(SubmitOptions(job_id="j", labels={"env": "prod", "owner": "me"}), CONFIG)
    assert merged["labels"] == {"env": "prod", "owner": "me", "team": "ml"}


def test_user_args_replace_only_when_given() -> None:
    assert merge_job(SubmitOptions(job_id="j"), CONFIG)["trainingInput"]["args"] == ["--from-config"]
    assert merge_job(SubmitOptions(job_id="j", user_args=[]), CONFIG)["trainingInput"]["args"] == []
    assert merge_job(SubmitOptions(job_id="j", user_args=["--x", "1"]), CONFIG)["trainingInput"]["args"] == [
        "--x", "1"]


def test_machine_flags_deep_set_into_config() -> None:
    options = SubmitOptions(job_id="j", master_machine_type="n1-standard-8", worker_machine_type="n1-standard-4",
                            worker_count=2, worker_accelerator=Accelerator("NVIDIA_TESLA_T4", 2),
                            master_image_uri="gcr.io/p/img")
    ti = merge_job(options, CONFIG)["trainingInput"]
    assert ti["masterType"] == "n1-standard-8"
    assert ti["masterConfig"]["acceleratorConfig"] == {"type": "NVIDIA_TESLA_T4", "count": "1"}
    assert ti["masterConfig"]["diskConfig"] == {"bootDiskSizeGb": 200}
    assert ti["masterConfig"]["imageUri"] == "gcr.io/p/img"
    assert ti["workerCount"] == "2"
    assert ti["workerConfig"] == {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "2"}}


def test_bucket_only_job_dir_gets_a_slash() -> None:
    assert merge_job(SubmitOptions(job_id="j", job_dir="gs://bucket"), None)["trainingInput"]["jobDir"] == (
        "gs://bucket/")


def test_config_is_not_mutated() -> None:
    import copy

    before = copy.deepcopy(CONFIG)
    merge_job(SubmitOptions(job_id="j", labels={"a": "b"}, master_accelerator=Accelerator("NVIDIA_TESLA_T4", 4)),
              CONFIG)
    assert before == CONFIG


def test_one_flag_table_drives_options_and_fields() -> None:
    import dataclasses

    from aiptrain._job.spec import ReplicaConfig, TrainingInput, field_aliases
    from aiptrain._submit.flags import OPTION_FLAGS, SUBMIT_FLAGS

    # Not flags: the positional job ID and user args, the region's resolution, and the Python API's job body.
    own = {"job_id", "region", "default_region", "user_args", "config_body"}
    assert {f.name for f in dataclasses.fields(SubmitOptions)} == {e.dest for e in OPTION_FLAGS} | own
    # Every field a flag names exists in the REST schema.
    models = {"masterConfig": ReplicaConfig, "workerConfig": ReplicaConfig, "parameterServerConfig": ReplicaConfig}
    for entry in SUBMIT_FLAGS:
        if entry.field is None:
            continue
        head, _, rest = entry.field.partition(".")
        assert head in field_aliases(TrainingInput), entry.flag
        if rest and head in models:
            assert rest in field_aliases(models[head]), entry.flag


def test_every_flag_lands_on_its_field() -> None:
    options = SubmitOptions(job_id="j", module_name="m", job_dir="gs://b", scale_tier="CUSTOM",
                            runtime_version="2.11", python_version="3.7", service_account="sa@p.iam",
                            kms_key="projects/p/locations/l/keyRings/r/cryptoKeys/k", enable_web_access=True,
                            use_chief_in_tf_config=False, parameter_server_machine_type="n1-standard-4",
                            parameter_server_count=3, parameter_server_image_uri="gcr.io/p/ps",
                            parameter_server_accelerator=Accelerator("NVIDIA_TESLA_T4", 1))
    ti = merge_job(options, None)["trainingInput"]
    assert ti == {
        "pythonModule": "m", "jobDir": "gs://b/", "scaleTier": "CUSTOM", "runtimeVersion": "2.11",
        "pythonVersion": "3.7", "parameterServerType": "n1-standard-4", "parameterServerCount": "3",
        "parameterServerConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"},
                                  "imageUri": "gcr.io/p/ps"},
        "useChiefInTfConfig": False, "serviceAccount": "sa@p.iam",
        "encryptionConfig": {"kmsKeyName": "projects/p/locations/l/keyRings/r/cryptoKeys/k"},
        "enableWebAccess": True,
    }
