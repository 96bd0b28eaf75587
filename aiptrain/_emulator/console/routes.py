"""The console's routes, served by `local serve` beside the APIs, behind the same guard.

    GET  /                                             -> the jobs of a project (303)
    GET  /console/?project=P                           -> the jobs of P (303)
    GET  /console/projects/{p}/jobs[?filter=&page=]    the jobs page (?part=rows: its rows)
    GET  /console/projects/{p}/jobs/{id}               the job page (?part=panels: its live panels, JSON)
    GET  /console/projects/{p}/jobs/{id}/logs          a page of log lines before ?before= (JSON)
    GET  /console/projects/{p}/jobs/{id}/logs/stream   new log lines after ?after= (server-sent events)
    POST /console/projects/{p}/jobs/{id}/cancel        cancel the job (X-CSRF-Token required)
    GET  /console/static/{name}                        the stylesheet, script and icon

By the time a request gets here the guard has checked its Host, its Origin and its token or
session cookie (`login`). Reads go through the engine the APIs use (`Services.engine`), in the
thread pool; nothing here opens the store itself. The only route that changes anything, cancel,
also needs the session's CSRF token, which a page of another site cannot read or send.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from collections.abc import Awaitable, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from aiptrain._backends import DEFAULT_LOCAL_PROJECT
from aiptrain._emulator.console.assets import STATIC_PREFIX, asset
from aiptrain._emulator.console.html import Html, page, tag
from aiptrain._emulator.console.job_page import LIVE_PANELS, render_job, render_panel, state_of
from aiptrain._emulator.console.job_view import read_job
from aiptrain._emulator.console.jobs_page import jobs_url, read_jobs, render_jobs, render_rows
from aiptrain._emulator.console.log_pages import (
    SEVERITIES,
    LogFilter,
    cursor_text,
    entry_json,
    page_before,
    parse_cursor,
)
from aiptrain._emulator.console.log_stream import BATCH, Stopping, follow
from aiptrain._emulator.console.responses import NO_STORE, SECURITY_HEADERS, html_page, json_answer
from aiptrain._emulator.console.summaries import SummaryReader
from aiptrain._emulator.services import Services
from aiptrain._emulator.tokens import csrf_token, session_cookie_name
from aiptrain._job.filters import MAX_FILTER_CHARS
from aiptrain._job.logs import LogCursor, LogEntry
from aiptrain._job.spec import JobState
from aiptrain._job.state import TERMINAL_STATES
from aiptrain._replicas.clock import utc_now
from aiptrain.errors import AiptrainError, JobAlreadyFinished, NotFound

CSRF_HEADER = "x-csrf-token"
MAX_TASK_CHARS = 100

Endpoint = Callable[[Request], Awaitable[Response]]


class Console:
    """The console of one server: its routes, its CSRF secret and what it remembers of summaries."""

    def __init__(self, services: Services, *, token: str | None, stopping: Stopping | None = None) -> None:
        self.services = services
        # Signs the CSRF tokens: the server's token, or a secret of this run when it asks for none.
        self.secret = token or secrets.token_urlsafe(32)
        self.summaries = SummaryReader()
        self.stopping = stopping or threading.Event()

    def routes(self) -> list[Route]:
        job = "/console/projects/{project}/jobs/{job_id}"
        return [
            Route("/", self.home, methods=["GET"]),
            Route("/console", self.home, methods=["GET"]),
            Route("/console/", self.home, methods=["GET"]),
            Route(STATIC_PREFIX + "{name}", self.static, methods=["GET"]),
            Route("/console/projects/{project}/jobs", _answering(self.jobs), methods=["GET"]),
            Route(job, _answering(self.job), methods=["GET"]),
            Route(f"{job}/logs", _answering(self.logs), methods=["GET"]),
            Route(f"{job}/logs/stream", _answering(self.stream), methods=["GET"]),
            Route(f"{job}/cancel", _answering(self.cancel), methods=["POST"]),
        ]

    def csrf(self, request: Request) -> str:
        port = request.url.port or (request.scope.get("server") or ("", 80))[1]
        return csrf_token(self.secret, request.cookies.get(session_cookie_name(int(port)), ""))

    async def _page(self, request: Request, title: str, body: Html, project: str, status: int = 200) -> Response:
        projects = await run_in_threadpool(self.services.engine.projects)
        return html_page(page(title, body, csrf=self.csrf(request), projects=projects, project=project), status)

    # -- pages ----------------------------------------------------------------------------------

    async def home(self, request: Request) -> Response:
        project = request.query_params.get("project")
        if not project:
            projects = await run_in_threadpool(self.services.engine.projects)
            project = projects[0] if projects else DEFAULT_LOCAL_PROJECT
        return RedirectResponse(jobs_url(project), status_code=303, headers={**SECURITY_HEADERS, **NO_STORE})

    async def jobs(self, request: Request) -> Response:
        project = request.path_params["project"]
        filter_text = request.query_params.get("filter", "")[:MAX_FILTER_CHARS]
        page_token = request.query_params.get("page") or None
        listing = await run_in_threadpool(read_jobs, self.services, project, filter_text, page_token)
        status = 400 if listing.problem else 200
        if request.query_params.get("part") == "rows":
            return html_page(render_rows(project, listing, utc_now(), filtered=bool(filter_text)), status)
        body = render_jobs(project, filter_text, page_token, listing, utc_now())
        return await self._page(request, f"Jobs of {project}", body, project, status)

    async def job(self, request: Request) -> Response:
        project, job_id = request.path_params["project"], request.path_params["job_id"]
        view = await run_in_threadpool(read_job, self.services, self.summaries, project, job_id)
        now = utc_now()
        if request.query_params.get("part") == "panels":
            state = state_of(view)
            return json_answer({"state": state.value, "terminal": state in TERMINAL_STATES,
                                "panels": {name: render_panel(view, name, now) for name in LIVE_PANELS}})
        return await self._page(request, job_id, render_job(view, now), project)

    # -- logs -----------------------------------------------------------------------------------

    async def logs(self, request: Request) -> Response:
        project, job_id = request.path_params["project"], request.path_params["job_id"]
        read, log_filter = self._log_reader(request, project, job_id)
        before = parse_cursor(request.query_params.get("before"))
        found = await run_in_threadpool(page_before, read, before, log_filter)
        return json_answer({"entries": [entry_json(entry) for entry in found.entries],
                            "earlier": cursor_text(found.start) if found.start else None,
                            "end": cursor_text(found.end) if found.end else None})

    async def stream(self, request: Request) -> Response:
        project, job_id = request.path_params["project"], request.path_params["job_id"]
        read, log_filter = self._log_reader(request, project, job_id)
        await run_in_threadpool(self.services.engine.get, project, job_id)  # NotFound before streaming
        after = parse_cursor(request.headers.get("last-event-id")) or parse_cursor(request.query_params.get("after"))

        def job_state() -> JobState:
            return self.services.engine.get(project, job_id).state or JobState.STATE_UNSPECIFIED

        def read_after(cursor: LogCursor | None) -> list[LogEntry]:
            return read(cursor, BATCH)

        events = follow(read_after, job_state, after, log_filter, self.stopping)
        return StreamingResponse(events, media_type="text/event-stream",
                                 headers={**SECURITY_HEADERS, **NO_STORE, "X-Accel-Buffering": "no"})

    def _log_reader(self, request: Request, project: str, job_id: str) -> tuple[
            Callable[[LogCursor | None, int], list[LogEntry]], LogFilter]:
        severity = request.query_params.get("severity") or None
        if severity is not None and severity not in SEVERITIES:
            raise _BadRequest(f"Unknown severity {severity[:20]!r}: one of {', '.join(SEVERITIES)}.")
        task = (request.query_params.get("task") or "")[:MAX_TASK_CHARS] or None

        def read(after: LogCursor | None, limit: int) -> list[LogEntry]:
            return self.services.engine.logs(project, job_id, after=after, task_name=task, limit=limit)

        return read, LogFilter(severity)

    # -- cancel ---------------------------------------------------------------------------------

    async def cancel(self, request: Request) -> Response:
        sent = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(sent.encode(), self.csrf(request).encode()):
            return json_answer({"error": "This request lacks the page's CSRF token: reload the page."}, 403)
        project, job_id = request.path_params["project"], request.path_params["job_id"]
        try:
            job = await run_in_threadpool(self.services.engine.cancel, project, job_id)
        except JobAlreadyFinished as error:
            return json_answer({"error": error.message}, 409)
        return json_answer({"state": (job.state or JobState.STATE_UNSPECIFIED).value})

    # -- assets ---------------------------------------------------------------------------------

    async def static(self, request: Request) -> Response:
        found = asset(request.path_params["name"])
        if found is None:
            return Response("Not found", status_code=404, media_type="text/plain", headers=SECURITY_HEADERS)
        fresh = request.query_params.get("v") == found.version
        cache = "public, max-age=31536000, immutable" if fresh else "no-cache"
        return Response(found.body, media_type=found.media_type, headers={**SECURITY_HEADERS, "Cache-Control": cache})


class _BadRequest(Exception):
    pass


def _answering(endpoint: Endpoint) -> Endpoint:
    """A missing job is a 404, a refused query a 400, a store in trouble a 503: a short page (or
    JSON for the script's requests), never a traceback."""
    async def answered(request: Request) -> Response:
        wants_json = request.method != "GET" or request.url.path.endswith(("/logs", "/stream")) or \
            request.query_params.get("part") == "panels"
        try:
            return await endpoint(request)
        except NotFound:
            project, job_id = request.path_params["project"], request.path_params.get("job_id", "")
            message = f"There is no job {job_id!r} in project {project!r}."
            return _problem(message, 404, wants_json, project)
        except _BadRequest as error:
            return _problem(str(error), 400, wants_json, request.path_params["project"])
        except AiptrainError as error:
            return _problem(error.message, 503, wants_json, request.path_params["project"])

    return answered


def _problem(message: str, status: int, wants_json: bool, project: str) -> Response:
    if wants_json:
        return json_answer({"error": message}, status)
    body = tag("div", tag("h1", "Not found" if status == 404 else "Trouble"), tag("p", message, class_="error"),
               tag("p", tag("a", "The jobs of this project", href=jobs_url(project))), class_="narrow")
    return html_page(page("Not found" if status == 404 else "Trouble", body, csrf="", projects=[], project=project),
                     status)
