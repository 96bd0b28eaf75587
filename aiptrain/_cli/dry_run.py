"""Rendering of `--dry-run` (`submission.dry_run_document` computes it): the request body, the
uploads, the cluster, TF_CONFIG, the Vertex body."""

from __future__ import annotations

from typing import Any

from aiptrain._cli.context import AppContext
from aiptrain._cli.formats import dump_yaml
from aiptrain._cli.output import emit
from aiptrain._submit.submission import DryRun, SubmissionPlan


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
    if document.get("localRuntime"):
        lines += ["Runtime:", *(f"  {line}" for line in document["localRuntime"])]
    if document.get("localContainers"):
        lines += ["Containers (image and arguments, [limits]):", *(f"  {line}" for line in document["localContainers"])]
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


def render_dry_run(app: AppContext, dry_run: DryRun) -> None:
    emit(dry_run.document, app.output_format, text=_text(dry_run.plan, dry_run.document))
