"""`jobs describe --summarize`: the job in a few lines, and a trials table for tuning jobs."""

from __future__ import annotations

from aiptrain._cli.output import local_time_text, table
from aiptrain._job.spec import Job


def summarize_job(job: Job) -> str:
    ti = job.training_input
    lines = [
        f"jobId:      {job.job_id}",
        f"state:      {job.state.value if job.state else ''}",
        f"created:    {local_time_text(job.create_time)}",
        f"started:    {local_time_text(job.start_time)}",
        f"ended:      {local_time_text(job.end_time)}",
    ]
    if ti is not None:
        lines.append(f"scaleTier:  {(ti.scale_tier.value if ti.scale_tier else 'BASIC')}")
        lines.append(f"module:     {ti.python_module or ''}")
    if job.error_message:
        lines.append(f"error:      {job.error_message}")
    output = job.training_output
    if output and output.trials:
        rows = []
        for trial in output.trials:
            metric = trial.final_metric
            state = trial.state.value if trial.state else ""
            rows.append([
                trial.trial_id or "",
                f"{state} (stopped early)" if trial.is_trial_stopped_early else state,
                "" if metric is None or metric.objective_value is None else f"{metric.objective_value:.6g}",
                "" if metric is None or metric.training_step is None else str(metric.training_step),
                ", ".join(f"{k}={v}" for k, v in sorted((trial.hyperparameters or {}).items())),
            ])
        lines += ["", f"trials ({output.hyperparameter_metric_tag or 'metric'}, best first):",
                  table(rows, ["TRIAL", "STATE", "OBJECTIVE", "STEP", "HYPERPARAMETERS"])]
    return "\n".join(lines)
