"""The emulator's HTTP application: ml v1 jobs, Vertex AI custom and tuning jobs, logging v2 entries.

Routes (the paths googleapiclient builds from the discovery documents):

    POST /v1/projects/{p}/jobs                                   ml.projects.jobs.create
    GET  /v1/projects/{p}/jobs                                   ml.projects.jobs.list
    GET  /v1/projects/{p}/jobs/{id}                              ml.projects.jobs.get
    PATCH /v1/projects/{p}/jobs/{id}?updateMask=labels           ml.projects.jobs.patch
    POST /v1/projects/{p}/jobs/{id}:cancel                       ml.projects.jobs.cancel
    POST /v1/projects/{p}/locations/{l}/customJobs               aiplatform ... customJobs.create
    GET  /v1/projects/{p}/locations/{l}/customJobs               aiplatform ... customJobs.list
    GET  /v1/projects/{p}/locations/{l}/customJobs/{n}           aiplatform ... customJobs.get
    POST /v1/projects/{p}/locations/{l}/customJobs/{n}:cancel    aiplatform ... customJobs.cancel
    POST /v1/projects/{p}/locations/{l}/hyperparameterTuningJobs            ... hyperparameterTuningJobs.create
    GET  /v1/projects/{p}/locations/{l}/hyperparameterTuningJobs            ... hyperparameterTuningJobs.list
    GET  /v1/projects/{p}/locations/{l}/hyperparameterTuningJobs/{n}        ... hyperparameterTuningJobs.get
    POST /v1/projects/{p}/locations/{l}/hyperparameterTuningJobs/{n}:cancel ... hyperparameterTuningJobs.cancel
    POST|GET /v1/projects/{p}/locations/{l}/trainingPipelines[/{n}[:cancel]]   ... trainingPipelines (pipelines_api)
    POST /v2/entries:list                                        logging.entries.list
    GET  / and /console/...                                      the console (see `console.routes`)

A project may be named by its ID or by the number the emulator gave it (see `projects`); handlers
get the ID. Every answer is JSON; every error is Google's error object. Before any route, `guard`
checks the Host, the Origin, the bearer token (when one is configured) and the body's content
type. Handlers are synchronous (the engine uses SQLite and processes) and run in Starlette's
thread pool.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from aiptrain._emulator import logging_api, mlv1_api, pipelines_api, tuning_api, vertex_api
from aiptrain._emulator.console.log_stream import Stopping
from aiptrain._emulator.console.login import ConsoleLogin
from aiptrain._emulator.console.routes import Console
from aiptrain._emulator.errors import ApiError, from_aiptrain_error
from aiptrain._emulator.faults import FaultPlan
from aiptrain._emulator.guard import RequestGuard
from aiptrain._emulator.limits import parse_json_body, read_capped_body
from aiptrain._emulator.schema import Violation
from aiptrain._emulator.services import Services, make_services
from aiptrain._job.project_id import project_id_problem
from aiptrain.errors import AiptrainError

if TYPE_CHECKING:
    from aiptrain._backends.local.job_engine import LocalJobEngine

LOG = logging.getLogger("aiptrain.emulator")
V1 = "GoogleCloudAiplatformV1"  # the aiplatform v1 schemas' prefix

# (params, query, body) -> response body
Handler = Callable[[dict[str, str], dict[str, str], Any], dict[str, Any]]


def _error_response(error: ApiError) -> Response:
    return JSONResponse(error.body(), status_code=error.http_status, headers=error.headers or None)


async def _read_body(request: Request) -> Any:
    return parse_json_body(await read_capped_body(request))


def _endpoint(handler: Handler, *, faults: FaultPlan | None) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            if faults is not None:
                injected = faults.check(request.method, request.url.path)
                if injected is not None:
                    return _error_response(injected)
            body = await _read_body(request) if request.method in ("POST", "PATCH") else None
            params = dict(request.path_params)
            _check_project(params.get("project"))
            _check_location(params.get("location"))
            query = dict(request.query_params)
            result = await run_in_threadpool(handler, params, query, body)
            return JSONResponse(result)
        except ApiError as error:
            return _error_response(error)
        except ClientDisconnect:
            return Response(status_code=499)  # nobody reads it: the client hung up mid-body
        except AiptrainError as error:
            return _error_response(from_aiptrain_error(error, root=""))
        except Exception:
            LOG.exception("internal error serving %s %s", request.method, request.url.path)
            return _error_response(ApiError("INTERNAL", "Internal error in the aiptrain emulator."))

    return endpoint


def _check_project(project: str | None) -> None:
    problem = project_id_problem(project) if project is not None else None
    if problem:
        raise ApiError("INVALID_ARGUMENT", f"Invalid resource name projects/{project}: {problem}.",
                       (Violation("name", problem),))


# A region (`us-central1`) or `global`: lowercase letters, digits and hyphens.
_LOCATION = re.compile(r"[a-z][a-z0-9-]{0,62}")


def _check_location(location: str | None) -> None:
    if location is not None and not _LOCATION.fullmatch(location):
        shown = location[:64].encode("unicode_escape").decode("ascii")
        problem = "a location is a region such as us-central1 (lowercase letters, digits and hyphens)"
        raise ApiError("INVALID_ARGUMENT", f"Invalid resource name locations/{shown}: {problem}.",
                       (Violation("name", problem),))


def create_app(
    engine: LocalJobEngine,
    *,
    token: str | None = None,
    bind_host: str = "127.0.0.1",
    faults: FaultPlan | None = None,
    storage_root: Path | None = None,
    state_dir: Path | None = None,
    stopping: Stopping | None = None,
    proxied_port: int | None = None,
) -> RequestGuard:
    """The ASGI app over `engine`, behind the request guard.

    token:        the bearer token every request must carry (None: no token is asked for)
    bind_host:    the address served, a Host name accepted besides the loopback names
    storage_root: where `gs://` URIs live (default: the engine home's `storage`, the local store)
    state_dir:    where Vertex job records are kept (default: the engine home's `emulator`)
    faults:       test-only fault injection (see `faults`)
    stopping:     set when the server shuts down: the console's event streams end
    proxied_port: the port the proxy hands requests for Google's names to (Host may name them there)
    """
    services = make_services(engine, storage_root=storage_root, state_dir=state_dir)

    def by_project_id(handler: Handler, *, remember: bool) -> Handler:
        def resolved(params: dict[str, str], query: dict[str, str], body: Any) -> dict[str, Any]:
            if "project" in params:
                project = params["project"]
                if remember and not project.isdigit():
                    # From now on its number leads back to it. Only requests that change state
                    # write: reads of any number of made-up projects must not grow the file.
                    services.projects.number(project)
                params = {**params, "project": services.projects.project_id(project)}
            return handler(params, query, body)

        return resolved

    def route(path: str, method: str, handler: Handler, answers: str | None = None) -> Route:
        """`answers`: the aiplatform v1 schema of the response, whose enums go back as numbers
        to a client that asks for them (`$alt=json;enum-encoding=int`)."""
        def answered(params: dict[str, str], query: dict[str, str], body: Any) -> dict[str, Any]:
            return services.answer(handler(params, query, body), answers, query)

        return Route(path, _endpoint(by_project_id(answered, remember=method != "GET"), faults=faults),
                     methods=[method])

    jobs = "/v1/projects/{project}/jobs"
    routes = [
        route(f"{jobs}/{{job_id}}:cancel", "POST",
              lambda p, q, b: mlv1_api.cancel_job(services, p["project"], p["job_id"], b)),
        route(jobs, "POST", lambda p, q, b: mlv1_api.create_job(services, p["project"], b)),
        route(jobs, "GET", lambda p, q, b: mlv1_api.list_jobs(services, p["project"], q)),
        route(f"{jobs}/{{job_id}}", "GET", lambda p, q, b: mlv1_api.get_job(services, p["project"], p["job_id"])),
        route(f"{jobs}/{{job_id}}", "PATCH",
              lambda p, q, b: mlv1_api.patch_job(services, p["project"], p["job_id"], q, b)),
        *_collection_routes(route, services, "customJobs", "custom_job", "CustomJob", vertex_api.cancel_custom_job,
                            vertex_api.create_custom_job, vertex_api.list_custom_jobs, vertex_api.get_custom_job),
        *_collection_routes(route, services, "hyperparameterTuningJobs", "tuning_job", "HyperparameterTuningJob",
                            tuning_api.cancel_tuning_job, tuning_api.create_tuning_job, tuning_api.list_tuning_jobs,
                            tuning_api.get_tuning_job),
        *_collection_routes(route, services, "trainingPipelines", "pipeline", "TrainingPipeline",
                            pipelines_api.cancel_training_pipeline, pipelines_api.create_training_pipeline,
                            pipelines_api.list_training_pipelines, pipelines_api.get_training_pipeline),
        route("/v2/entries:list", "POST", lambda p, q, b: logging_api.list_entries(services, b)),
    ]
    # The console in the browser (`/`, `/console/...`); its login is the guard's for console paths.
    routes += Console(services, token=token, stopping=stopping).routes()
    not_found = _endpoint(_unknown_method, faults=None)
    routes.append(Route("/{path:path}", not_found,
                        methods=["GET", "POST", "PUT", "PATCH", "DELETE"]))
    return RequestGuard(Starlette(routes=routes), token=token, bind_host=bind_host, console=ConsoleLogin(token),
                        proxied_port=proxied_port)


def _collection_routes(route: Callable[..., Route], services: Services, collection: str, item: str, resource: str,
                       cancel: Callable[..., Any], create: Callable[..., Any], list_: Callable[..., Any],
                       get: Callable[..., Any]) -> list[Route]:
    """The four routes every Vertex AI job collection has (cancel, create, list, get), answered as
    the resource `resource` of aiplatform v1."""
    many = f"/v1/projects/{{project}}/locations/{{location}}/{collection}"
    one = f"{many}/{{{item}}}"
    return [
        route(f"{one}:cancel", "POST", lambda p, q, b: cancel(services, p["project"], p["location"], p[item], b)),
        route(many, "POST", lambda p, q, b: create(services, p["project"], p["location"], b), f"{V1}{resource}"),
        route(many, "GET", lambda p, q, b: list_(services, p["project"], p["location"], q),
              f"{V1}List{resource}sResponse"),
        route(one, "GET", lambda p, q, b: get(services, p["project"], p["location"], p[item]), f"{V1}{resource}"),
    ]


def _unknown_method(params: dict[str, str], query: dict[str, str], body: Any) -> dict[str, Any]:
    raise ApiError("NOT_FOUND", f"The aiptrain emulator does not serve /{params.get('path', '')}.")
