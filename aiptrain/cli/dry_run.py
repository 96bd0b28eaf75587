"""Rendering of `--dry-run`: the request body, the uploads, the cluster, TF_CONFIG, the Vertex body."""

from __future__ import annotations

from typing import Any

from aiptrain.catalog import Catalog
from aiptrain.cli.context import AppContext
from aiptrain.cli.output import dump_yaml, emit
from aiptrain.errors import ValidationFailed
from aiptrain.submission import SubmissionPlan, plan_summary


def _vertex_translation(plan: SubmissionPlan, catalog: Catalog) -> dict[str, Any]:
    """The Vertex AI CustomJob (HyperparameterTuningJob for tuning) this job becomes, or why it cannot."""
    from aiptrain.vertex_study import is_tuning_job, vertex_request_body

    kind = "hyperparameterTuningJob" if is_tuning_job(plan.job) else "customJob"
    try:
        return {kind: vertex_request_body(plan.job, catalog)}
    except ValidationFailed as failed:
        return {"problems": [p.render() for p in failed.problems]}


def _tf_configs(plan: SubmissionPlan) -> dict[str, Any]:
    from aiptrain.runner.tf_config import tf_configs_for

    return tf_configs_for(plan.job, plan.cluster)


def _apply_local_plan(plan: SubmissionPlan, catalog: Catalog) -> None:
    """On the local backend, show the cluster that will really start (AIPTRAIN_LOCAL_REPLICA_CAP)."""
    from aiptrain.runner.cluster_plan import plan_cluster
    from aiptrain.runner.settings import LocalSettings

    assert plan.job.training_input is not None
    local = plan_cluster(plan.job.training_input, catalog, LocalSettings.from_env())
    plan.cluster = local.groups
    plan.warnings.extend(local.warnings)


def _human_size(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.1f} kB"


def _text(plan: SubmissionPlan, document: dict[str, Any]) -> str:
    lines = ["Dry run: nothing was uploaded and no job was created.", "",
             f"Job {plan.job.job_id} on backend {plan.backend_name} (project {plan.project})"]
    if plan.package is not None:
        origin = "from the build cache" if plan.package.reused_from_cache else "built"
        lines.append(f"Package: {plan.package.path.name} ({_human_size(plan.package.size)}, "
                     f"sha256 {plan.package.sha256[:12]}, {origin})")
    if plan.uploads:
        lines.append("Uploads:")
        verbs = {"reuse": "reuse  ", "upload": "upload ", "unknown": "upload?"}
        lines += [f"  {verbs.get(u.status, u.status)} {u.local} -> {u.uri}" for u in plan.uploads]
        if any(u.status == "unknown" for u in plan.uploads):
            lines.append("  (upload?: a dry run does not ask GCS whether the object exists)")
    lines.append("Cluster:")
    for group in plan.cluster:
        accel = f" + {group.accelerator_count} x {group.accelerator_type}" if group.accelerator_type else ""
        names = group.task_names()
        shown = names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]}"
        lines.append(f"  {shown:<38} {group.task_type:<9} {group.machine_type or ''}{accel}")
    lines += ["Request body:", *("  " + line for line in dump_yaml(plan.request_body).splitlines())]
    vertex = document["vertex"]
    if "problems" in vertex:
        lines.append("Vertex AI translation: not possible:")
        lines += [f"  - {problem}" for problem in vertex["problems"]]
    elif "hyperparameterTuningJob" in vertex:
        tuning = vertex["hyperparameterTuningJob"]
        pools = tuning.get("trialJobSpec", {}).get("workerPoolSpecs", [])
        lines.append(f"Vertex AI translation: a HyperparameterTuningJob of up to {tuning['maxTrialCount']} "
                     f"trials ({tuning['parallelTrialCount']} at a time), each a CustomJob with {len(pools)} "
                     "worker pool(s).")
    else:
        pools = vertex["customJob"].get("jobSpec", {}).get("workerPoolSpecs", [])
        lines.append(f"Vertex AI translation: a CustomJob with {len(pools)} worker pool(s).")
    lines += [f"warning: {warning}" for warning in plan.warnings]
    lines.append("Per-replica TF_CONFIG and the full Vertex body: --format json or yaml.")
    return "\n".join(lines)


def render_dry_run(app: AppContext, plan: SubmissionPlan, catalog: Catalog) -> None:
    if plan.backend_name == "local":
        _apply_local_plan(plan, catalog)
    if plan.backend_name == "ray":
        from aiptrain.raybackend.plan import notes
        from aiptrain.raybackend.settings import resource_scale

        assert plan.job.training_input is not None
        plan.warnings.extend(notes(plan.job.training_input, resource_scale(app.ray_resource_scale)))
    document = plan_summary(plan, vertex=_vertex_translation(plan, catalog), tf_configs=_tf_configs(plan))
    emit(document, app.output_format, text=_text(plan, document))
