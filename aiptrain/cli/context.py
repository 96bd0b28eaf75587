"""Options every command shares, and the context object built from them.

Each option can also come from an `AIPTRAIN_*` environment variable (named in its help), so a
CI pipeline sets them once. Like gcloud's global flags they are accepted anywhere: after the
command, or before it on the command groups (`global_options`), the command's own winning. What no
flag or variable gives comes from gcloud's active configuration (`gcloud_properties`).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from aiptrain.backends.base import Backend

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class AppContext:
    backend_name: str
    project: str | None
    api_endpoint: str | None
    output_format: str | None  # None: the command's own output
    verbosity: int
    region: str | None = None
    ray_address: str | None = None
    ray_resource_scale: float | None = None

    @property
    def color(self) -> bool:
        return sys.stderr.isatty() and "NO_COLOR" not in os.environ

    def project_id(self) -> str:
        """The project jobs belong to; the local backend has a default, the cloud ones do not."""
        if self.project:
            from aiptrain.job.project_id import project_id_problem, suggest_project_id

            problem = project_id_problem(self.project)
            if problem:
                from aiptrain.errors import UsageError

                raise UsageError(f"--project: {problem}", hint=f"use e.g. {suggest_project_id(self.project)}")
            return self.project
        from aiptrain.backends import backend_entry

        default = backend_entry(self.backend_name).default_project
        if default is not None:
            return default
        from aiptrain.errors import UsageError

        raise UsageError(
            f"backend {self.backend_name!r} needs a project",
            hint="pass --project my-project or set AIPTRAIN_PROJECT",
        )

    def backend(self, region: str | None = None) -> Backend:
        """The chosen backend; `region` (a submit's job region) wins over --region/AIPTRAIN_REGION."""
        from aiptrain.backends import get_backend
        from aiptrain.backends.base import BackendSettings
        from aiptrain.paths import aiptrain_home

        settings = BackendSettings(
            project=self.project_id(),
            region=region or self.region,
            home=aiptrain_home(),
            api_endpoint=self.api_endpoint,
            verbosity=self.verbosity,
            ray_address=self.ray_address,
            ray_resource_scale=self.ray_resource_scale,
        )
        return get_backend(self.backend_name, settings)

    def progress(self, message: str) -> None:
        """A progress line on stderr, unless -q."""
        if self.verbosity >= 0:
            click.echo(message, err=True)

    def detail(self, message: str) -> None:
        """A line shown only with -v."""
        if self.verbosity >= 1:
            click.echo(message, err=True)


def _configure_logging(verbosity: int) -> None:
    """-vv shows aiptrain's debug log (REST requests, with credentials redacted) on stderr."""
    if verbosity < 2:
        return
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("debug: %(name)s: %(message)s"))
    logger = logging.getLogger("aiptrain")
    logger.setLevel(logging.DEBUG)
    if not any(isinstance(h, logging.StreamHandler) for h in logger.handlers):
        logger.addHandler(handler)


# gcloud's --verbosity levels as aiptrain's verbosity (-v adds one, -q takes one away).
VERBOSITY_LEVELS = {"debug": 2, "info": 1, "warning": 0, "error": -1, "critical": -1, "none": -2}
# Where global options given before the command (`aiptrain --format json jobs list`) wait for it.
_GLOBALS = "aiptrain.global_options"
# The shared options typed on the command line, before or after the command (not from a variable).
TYPED_OPTIONS = "aiptrain.typed_options"


def _shared_options(*, for_group: bool) -> list[Callable[[F], F]]:
    """The options every command takes, anywhere on the line. On a group they have no default and
    no environment variable: a value given there is kept for the command (see `_resolve`)."""

    def env(name: str | list[str]) -> dict[str, Any]:
        return {} if for_group else {"envvar": name}

    group_default: dict[str, Any] = {"default": None} if for_group else {}
    return [
        click.option("--backend", type=click.Choice(["local", "ray", "vertex", "mlv1"]),
                     **({"default": None} if for_group else {"default": "local", "show_default": True}),
                     **env("AIPTRAIN_BACKEND"), help="Where jobs run. [env: AIPTRAIN_BACKEND]"),
        click.option("--project", **env(["AIPTRAIN_PROJECT", "CLOUDSDK_CORE_PROJECT"]),
                     help="Project ID (default for local: local-project). [env: AIPTRAIN_PROJECT]"),
        click.option("--region", **env(["AIPTRAIN_REGION", "CLOUDSDK_COMPUTE_REGION"]),
                     help="Region (Vertex AI endpoint; a submit's job region). [env: AIPTRAIN_REGION]"),
        click.option("--api-endpoint", **env("AIPTRAIN_API_ENDPOINT"),
                     help="REST endpoint for mlv1/vertex, e.g. http://127.0.0.1:8080/ for `aiptrain local serve`."
                     " [env: AIPTRAIN_API_ENDPOINT]"),
        click.option("--ray-address", **env("AIPTRAIN_RAY_ADDRESS"),
                     help="Ray Jobs API of the cluster for --backend ray, e.g. http://127.0.0.1:8265 (else "
                     "RAY_ADDRESS). [env: AIPTRAIN_RAY_ADDRESS]"),
        click.option("--ray-resource-scale", type=float, **env("AIPTRAIN_RAY_RESOURCE_SCALE"),
                     help="--backend ray: reserve this fraction (0-1] of each machine type's CPUs and memory."
                     " [env: AIPTRAIN_RAY_RESOURCE_SCALE]"),
        click.option("--format", "output_format", **env("AIPTRAIN_FORMAT"), **group_default,
                     help="Result format on stdout, as in gcloud: json, yaml, text, value(KEY,...), "
                     "table(KEY,...), csv(KEY,...), list, none; see `aiptrain topic formats`. [env: AIPTRAIN_FORMAT]"),
        click.option("--verbosity", type=click.Choice(list(VERBOSITY_LEVELS)), **env("AIPTRAIN_VERBOSITY"),
                     help="gcloud's levels: debug, info, warning (default), error, critical, none. "
                     "[env: AIPTRAIN_VERBOSITY]"),
        click.option("--configuration", metavar="NAME",
                     help="The gcloud configuration whose project, region and endpoints fill in what no flag "
                     "or variable gives (default: CLOUDSDK_ACTIVE_CONFIG_NAME, else gcloud's active one)."),
        click.option("--log-http", is_flag=True, default=None,
                     help="Log each REST request aiptrain makes on stderr (credentials redacted), as -vv does."),
        click.option("-v", "--verbose", count=True, **group_default, help="More detail on stderr (repeatable)."),
        click.option("-q", "--quiet", count=True, **group_default, help="Less output on stderr."),
    ]


def _remember_globals(ctx: click.Context, values: dict[str, Any]) -> None:
    given = ctx.meta.setdefault(_GLOBALS, {})
    for name, value in values.items():
        if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE:
            given[name] = value


def global_options(group: F) -> F:
    """Let a command group take the shared options too (`aiptrain --format json jobs list`)."""
    callback = group

    @functools.wraps(callback)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        names = ("backend", "project", "region", "api_endpoint", "ray_address", "ray_resource_scale",
                 "output_format", "verbosity", "configuration", "log_http", "verbose", "quiet")
        _remember_globals(click.get_current_context(), {name: kwargs.pop(name) for name in names})
        return callback(*args, **kwargs)

    decorated: Any = wrapper
    for option in reversed(_shared_options(for_group=True)):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]


def _resolve(ctx: click.Context, values: dict[str, Any]) -> dict[str, Any]:
    """A command's own value wins when typed on the command line; then one typed before the
    command; then the environment and the default."""
    given = ctx.meta.get(_GLOBALS, {})
    resolved = dict(values)
    typed = set(given)
    for name in values:
        if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE:
            typed.add(name)
        elif name in given:
            resolved[name] = given[name]
    ctx.meta[TYPED_OPTIONS] = typed
    return resolved


def _fill_from_gcloud(values: dict[str, Any]) -> None:
    """What no flag or variable gave, from gcloud's active configuration (as gcloud would use it)."""
    from aiptrain.cli.gcloud_properties import read_properties

    properties = read_properties(values["configuration"])
    values["project"] = values["project"] or properties.get("core/project")
    values["region"] = values["region"] or properties.get("compute/region") or properties.get("ai_platform/region")
    endpoint = {"mlv1": "api_endpoint_overrides/ml", "vertex": "api_endpoint_overrides/aiplatform"}
    if not values["api_endpoint"] and values["backend"] in endpoint:
        values["api_endpoint"] = properties.get(endpoint[values["backend"]])


def common_options(func: F) -> F:
    """Add the shared options and pass an AppContext as the first argument."""

    @functools.wraps(func)
    def wrapper(*args: Any, backend: str, project: str | None, region: str | None, api_endpoint: str | None,
                ray_address: str | None, ray_resource_scale: float | None, output_format: str | None,
                verbosity: str | None, configuration: str | None, log_http: bool | None, verbose: int, quiet: int,
                **kwargs: Any) -> Any:
        values = _resolve(click.get_current_context(), {
            "backend": backend, "project": project, "region": region, "api_endpoint": api_endpoint,
            "ray_address": ray_address, "ray_resource_scale": ray_resource_scale, "output_format": output_format,
            "verbosity": verbosity, "configuration": configuration, "log_http": log_http, "verbose": verbose,
            "quiet": quiet})
        _fill_from_gcloud(values)
        if values["output_format"]:
            from aiptrain.job.projection import parse_format

            parse_format(values["output_format"])  # a bad --format is refused before any work
        level = values["verbosity"]
        app = AppContext(
            backend_name=values["backend"],
            project=values["project"],
            api_endpoint=values["api_endpoint"],
            output_format=values["output_format"] or None,
            verbosity=VERBOSITY_LEVELS[level] if level else values["verbose"] - values["quiet"],
            region=values["region"],
            ray_address=values["ray_address"],
            ray_resource_scale=values["ray_resource_scale"],
        )
        _configure_logging(2 if values["log_http"] else app.verbosity)
        return func(app, *args, **kwargs)

    decorated: Any = wrapper
    for option in reversed(_shared_options(for_group=False)):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]
