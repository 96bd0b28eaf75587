"""The jobs page: a project's jobs, newest first, a page at a time, narrowed by a gcloud filter.

The jobs come from the engine's own listing (`LocalJobEngine.list`), the one `jobs.list` serves, with
its filter (gcloud's `--filter` language, `job.filters`) and its page tokens. A filter the store
cannot turn into SQL is applied after each page is read, so a page is filled from as many of the
engine's pages as it takes, up to `MAX_ENGINE_PAGES`. The rows (`?part=rows`) are what the page's
script fetches again every few seconds, so states and durations move without a reload.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote, urlencode

from aiptrain._emulator.console.html import Html, join, state_badge, tag
from aiptrain._emulator.console.times import job_duration, shown_time
from aiptrain._emulator.services import Services
from aiptrain._job.spec import Job
from aiptrain.errors import UsageError

PAGE_SIZE = 100
MAX_ENGINE_PAGES = 20
FILTER_EXAMPLE = "state=RUNNING AND labels.team=nlp"
# The aiptrain backend that reaches a job through this server, by how it was created.
BACKEND_TITLES = {
    "mlv1": "ml v1 projects.jobs (aiptrain's mlv1 backend; jobs of the local backend on this AIPTRAIN_HOME too)",
    "vertex": "a Vertex AI customJob or hyperparameterTuningJob (aiptrain's vertex backend)",
}


@dataclass(frozen=True)
class JobsListing:
    jobs: list[Job]
    next_page: str | None  # the engine's token of the page after this one
    vertex_ids: dict[str, str]  # job ID -> numeric ID, for the jobs that run Vertex AI jobs
    problem: str | None = None  # why the filter or the page token was refused


def read_jobs(services: Services, project: str, filter_text: str, page: str | None) -> JobsListing:
    engine = services.engine
    collected: list[Job] = []
    token = page
    try:
        for _ in range(MAX_ENGINE_PAGES):
            jobs, token = engine.list(project, page_size=PAGE_SIZE - len(collected), page_token=token,
                                      filter=filter_text or None)
            collected += jobs
            if token is None or len(collected) >= PAGE_SIZE:
                break
    except UsageError as error:
        return JobsListing([], None, {}, error.message + (f" ({error.hint})" if error.hint else ""))
    return JobsListing(collected, token, engine.vertex_job_ids(project))


def jobs_url(project: str, **query: str | None) -> str:
    kept = {key: value for key, value in query.items() if value}
    return f"/console/projects/{quote(project, safe='')}/jobs" + (f"?{urlencode(kept)}" if kept else "")


def job_url(project: str, job_id: str) -> str:
    return f"/console/projects/{quote(project, safe='')}/jobs/{quote(job_id, safe='')}"


def render_rows(project: str, listing: JobsListing, now: datetime, *, filtered: bool) -> Html:
    if not listing.jobs:
        text = ("No jobs: the filter was refused." if listing.problem else
                "No job matches the filter." if filtered else "No jobs in this project yet.")
        return tag("tr", tag("td", text, colspan="6", class_="empty"))
    return join(_row(project, job, listing.vertex_ids, now) for job in listing.jobs)


def _row(project: str, job: Job, vertex_ids: dict[str, str], now: datetime) -> Html:
    job_id = job.job_id or ""
    state = job.state.value if job.state else "STATE_UNSPECIFIED"
    backend = "vertex" if job_id in vertex_ids else "mlv1"
    labels = [tag("span", f"{key}={value}", class_="label") for key, value in sorted((job.labels or {}).items())]
    if job.training_input is not None and job.training_input.hyperparameters is not None:
        labels.insert(0, tag("span", "tuning", class_="kind"))
    return tag("tr",
               tag("td", tag("a", job_id, href=job_url(project, job_id))),
               tag("td", state_badge(state)),
               tag("td", tag("time", shown_time(job.create_time), datetime=job.create_time or "")),
               tag("td", job_duration(job, now)),
               tag("td", tag("span", backend, title=BACKEND_TITLES[backend])),
               tag("td", *labels),
               data_job=job_id)


def render_jobs(project: str, filter_text: str, page: str | None, listing: JobsListing, now: datetime) -> Html:
    form = tag("form",
               tag("input", type="search", name="filter", value=filter_text, placeholder=FILTER_EXAMPLE,
                   aria_label="Filter (gcloud's --filter language)", size="60"),
               tag("button", "Filter"),
               tag("a", "clear", href=jobs_url(project)) if filter_text else Html(""),
               tag("span", "gcloud's filter language: state, jobId, labels.KEY, createTime, ... "
                   "joined with AND, OR, NOT (", tag("code", "aiptrain topic filters"), ")", class_="hint"),
               method="get", class_="filter")
    problem = tag("p", listing.problem, class_="error", role="alert") if listing.problem else Html("")
    head = tag("thead", tag("tr", *(tag("th", name) for name in
                                    ("Job", "State", "Created (UTC)", "Duration", "Backend", "Labels"))))
    rows_url = jobs_url(project, filter=filter_text, page=page, part="rows")
    rows = render_rows(project, listing, now, filtered=bool(filter_text))
    table = tag("table", head, tag("tbody", rows, id="job-rows"), class_="jobs",
                data_live=rows_url if listing.problem is None else None)
    paging = []
    if page:
        paging.append(tag("a", "Newest jobs", href=jobs_url(project, filter=filter_text)))
    if listing.next_page:
        paging.append(tag("a", "Older jobs", href=jobs_url(project, filter=filter_text, page=listing.next_page),
                          rel="next"))
    return join([tag("h1", "Jobs ", tag("span", project, class_="project")), form, problem, table,
                 tag("nav", *paging, class_="paging")])
