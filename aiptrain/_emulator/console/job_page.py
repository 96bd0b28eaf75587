"""The job page: overview, replicas, live logs, trials, training curves and the resource as JSON.

The page is rendered whole once; the panels that change while the job runs (`LIVE_PANELS`) are
rendered again on their own for the page's script (`?part=panels`), which swaps them in, so the
page follows the job without a reload. The log panel is an empty frame the script fills: the last
page of lines (`log_pages`), earlier pages on demand, new lines as server-sent events
(`log_stream`).
"""

from __future__ import annotations

import json
from datetime import datetime

from aiptrain._emulator.console.html import Html, definitions, join, state_badge, tag
from aiptrain._emulator.console.job_view import JobView
from aiptrain._emulator.console.jobs_page import BACKEND_TITLES, job_url, jobs_url
from aiptrain._emulator.console.log_pages import SEVERITIES
from aiptrain._emulator.console.svg_charts import curves_chart, legend
from aiptrain._emulator.console.times import job_duration, shown_time
from aiptrain._emulator.console.trials_view import render_trials
from aiptrain._job.state import TERMINAL_STATES, JobState
from aiptrain._job.task_names import vertex_task_name

LIVE_PANELS = ("overview", "replicas", "trials", "curves")
MAX_CURVE_TAGS = 24


def state_of(view: JobView) -> JobState:
    return view.job.state or JobState.STATE_UNSPECIFIED


def render_job(view: JobView, now: datetime) -> Html:
    job_id = view.job.job_id or ""
    state = state_of(view)
    base = job_url(view.project, job_id)
    cancel = tag("button", "Cancel job", type="button", id="cancel", class_="danger", data_url=f"{base}/cancel",
                 hidden=state in TERMINAL_STATES or state == JobState.CANCELLING)
    title = tag("div", tag("h1", job_id, " ", state_badge(state.value), id="job-title"), cancel, class_="title")
    back = tag("p", tag("a", f"← Jobs of {view.project}", href=jobs_url(view.project)), class_="crumbs")
    sections = [
        tag("section", render_panel(view, "overview", now), id="overview", class_="panel"),
        tag("section", render_panel(view, "replicas", now), id="replicas", class_="panel"),
        tag("section", _logs(view, base), id="logs", class_="panel logs", data_page=f"{base}/logs",
            data_stream=f"{base}/logs/stream"),
        tag("section", render_panel(view, "trials", now), id="trials", class_="panel",
            hidden=view.job.training_input is None or view.job.training_input.hyperparameters is None),
        tag("section", render_panel(view, "curves", now), id="curves", class_="panel"),
        tag("section", _resource(view), id="resource", class_="panel"),
    ]
    return tag("div", back, title, *sections, class_="job", data_live=f"{base}?part=panels",
               data_state=state.value, data_terminal="true" if state in TERMINAL_STATES else "false")


def render_panel(view: JobView, panel: str, now: datetime) -> Html:
    if panel == "overview":
        return _overview(view, now)
    if panel == "replicas":
        return _replicas(view)
    if panel == "trials":
        return render_trials(view.job) or Html("")
    return _curves(view)


def _overview(view: JobView, now: datetime) -> Html:
    job = view.job
    ti = job.training_input
    error = tag("pre", job.error_message, class_="error-message", role="alert") if job.error_message else Html("")
    labels = join(tag("span", f"{k}={v}", class_="label") for k, v in sorted((job.labels or {}).items()))
    timing = definitions([
        ("Created (UTC)", shown_time(job.create_time)),
        ("Started", shown_time(job.start_time)),
        ("Ended", shown_time(job.end_time)),
        ("Duration", job_duration(job, now)),
        ("Place in the queue", str(job.job_position) if job.job_position else ""),
        ("Labels", labels),
        ("Backend", tag("span", view.backend, title=BACKEND_TITLES[view.backend])),
        ("Resource", tag("code", view.resource_name)),
        ("ML units consumed", f"{job.training_output.consumed_m_l_units:g}"
         if job.training_output and job.training_output.consumed_m_l_units is not None else ""),
    ])
    training = definitions([] if ti is None else [
        ("Scale tier", ti.scale_tier.value if ti.scale_tier else "BASIC"),
        ("Region", ti.region),
        ("Runtime version", ti.runtime_version or "(the default)"),
        ("Python version", ti.python_version or "(the runtime's)"),
        ("Ran in", tag("ul", *(tag("li", note) for note in view.ran_in)) if view.ran_in else
         "recorded when the job is prepared"),
        ("Module", tag("code", ti.python_module) if ti.python_module else ""),
        ("Packages", tag("ul", *(tag("li", tag("code", uri)) for uri in ti.package_uris or []))),
        ("Arguments", tag("code", " ".join(ti.args or [])) if ti.args else ""),
        ("Job dir", tag("code", ti.job_dir) if ti.job_dir else ""),
    ])
    return join([error, tag("div", tag("div", tag("h2", "Job"), timing), tag("div", tag("h2", "TrainingInput"),
                                                                             training), class_="columns")])


def _replicas(view: JobView) -> Html:
    tuning = any(row.trial for row in view.replicas)
    names = ["Trial"] * tuning + ["Task", "Machine type", "State", "Restarts", "Share of this machine", "GPUs",
                                  "Image"]
    rows = [tag("tr", *([tag("td", row.trial)] * tuning), tag("td", _task_name(view, row.task)),
                tag("td", row.machine_type), tag("td", tag("span", row.state, class_=f"replica {row.state_class}")),
                tag("td", str(row.restarts)), tag("td", row.share or ("per trial slot, below" if tuning else "")),
                tag("td", row.gpus), tag("td", tag("code", row.image) if row.image else "the runtime's environment"),
                data_task=row.task)
            for row in view.replicas]
    table = tag("table", tag("thead", tag("tr", *(tag("th", name) for name in names))), tag("tbody", *rows),
                class_="replicas")
    lanes = tag("ul", *(tag("li", line) for line in view.share), class_="shares") if tuning and view.share else ""
    return join([tag("h2", "Replicas"), table, lanes])


def _task_name(view: JobView, task: str) -> Html:
    """The task as the engine and its log name it, and for a Vertex AI job as Vertex's logs do."""
    shown = tag("code", task)
    pool = vertex_task_name(task) if view.pool_task_names else task
    return join([shown, " ", tag("span", f"({pool})", class_="hint")]) if pool != task else shown


def _logs(view: JobView, base: str) -> Html:
    severity = tag("select", tag("option", "all", value=""), *(tag("option", f"{name} and above", value=name)
                                                             for name in SEVERITIES[1:]), name="severity")
    task = tag("select", tag("option", "all", value=""), *(tag("option", name, value=name) for name in view.tasks),
               name="task")
    toolbar = tag("form", tag("label", "Severity ", severity), tag("label", "Task ", task),
                  tag("label", tag("input", type="checkbox", name="follow", checked=True), " Follow the end"),
                  tag("span", "", class_="log-status", aria_live="polite"), class_="toolbar")
    return join([tag("h2", "Logs"), toolbar, tag("button", "Earlier lines", type="button", class_="earlier",
                                                 hidden=True),
                 tag("div", class_="log-lines", role="log", tabindex="0")])


def _curves(view: JobView) -> Html:
    heading = tag("h2", "Training curves")
    if view.summaries is None:
        return join([heading, tag("p", "This job has no gs:// job dir, so there are no summaries to show.",
                                  class_="empty")])
    where = tag("p", "From the summary event files under ", tag("code", str(view.summaries)),
                "; for everything else TensorBoard shows, run ",
                tag("code", f"tensorboard --logdir {view.summaries}"), ".", class_="hint")
    if not view.curves:
        return join([heading, tag("p", "No scalar summaries yet (tf.summary.scalar, or the Keras TensorBoard "
                                       "callback, writing under the job dir).", class_="empty"), where])
    charts = []
    for name, runs in list(view.curves.items())[:MAX_CURVE_TAGS]:
        charts.append(tag("figure", tag("figcaption", name), curves_chart(name, runs), legend(list(runs)),
                          class_="curve", data_tag=name))
    return join([heading, where, tag("div", *charts, class_="curves")])


def _resource(view: JobView) -> Html:
    text = json.dumps(view.resource, indent=2, sort_keys=True)
    return tag("details", tag("summary", "The resource as the API returns it"), tag("pre", text, class_="json"))
