"""A DAG of one MLEngineStartTrainingJobOperator, run with `dag.test()`, unchanged: no hook subclass,
no endpoint. Usage: python airflow_dag.py PROJECT JOB_ID PACKAGE_URI [TRAINER ARGS...]"""

import sys
from datetime import datetime

from airflow import DAG  # type: ignore[import-not-found]
from airflow.providers.google.cloud.operators.mlengine import (  # type: ignore[import-not-found]
    MLEngineStartTrainingJobOperator,
)

project, job_id, package_uri, *trainer_args = sys.argv[1:]

with DAG("aiptrain_clients", start_date=datetime(2025, 1, 1), schedule=None, catchup=False) as dag:
    MLEngineStartTrainingJobOperator(
        task_id="train", project_id=project, job_id=job_id, region="us-central1",
        runtime_version="2.11", python_version="3.7", scale_tier="BASIC",
        package_uris=[package_uri], training_python_module="trainer.task", training_args=trainer_args)

run = dag.test()
print("DAG RUN STATE:", run.state)
sys.exit(0 if run.state == "success" else 1)
