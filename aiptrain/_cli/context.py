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

from aiptrain._backends import DEFAULT_LOCAL_PROJECT
from aiptrain._emulator.defaults import DEFAULT_HOST, DEFAULT_PORT

if TYPE_CHECKING:
    from aiptrain._api.client import Client
    from aiptrain._backends.base import Backend, RequestOptions

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
    request_options: RequestOptions | None = None  # gcloud's --billing-project, --trace-token, ...

    @property
    def color(self) -> bool:
        return sys.stderr.isatty() and "NO_COLOR" not in os.environ

    def client(self) -> Client:
        """The Python API's client for these options: every command works through it."""
        from aiptrain._api.client import Client

        return Client(self.backend_name, self.project, self.region, self.api_endpoint, self.ray_address,
                      self.ray_resource_scale, self.verbosity, self.request_options)

    def project_id(self) -> str:
        """The project jobs belong to; the local backend has a default, the cloud ones do not."""
        return self.client().project_id()

    def backend(self, region: str | None = None) -> Backend:
        """The chosen backend; `region` (a submit's job region) wins over --region/AIPTRAIN_REGION."""
        return self.client().open_backend(region)

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
                     help=f"Project ID (default for local: {DEFAULT_LOCAL_PROJECT}). [env: AIPTRAIN_PROJECT]"),
        click.option("--region", **env(["AIPTRAIN_REGION", "CLOUDSDK_COMPUTE_REGION"]),
                     help="Region (Vertex AI endpoint; a submit's job region). [env: AIPTRAIN_REGION]"),
        click.option("--api-endpoint", **env("AIPTRAIN_API_ENDPOINT"),
                     help=f"REST endpoint for mlv1/vertex, e.g. http://{DEFAULT_HOST}:{DEFAULT_PORT}/ for "
                     "`aiptrain local serve`. [env: AIPTRAIN_API_ENDPOINT]"),
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
        *_gcloud_global_options(group_default),
        click.option("-v", "--verbose", count=True, **group_default, help="More detail on stderr (repeatable)."),
        click.option("-q", "--quiet", count=True, **group_default, help="Less output on stderr."),
    ]


# gcloud's global flags that aiptrain accepts so command lines carrying them keep working.
GCLOUD_GLOBALS = ("billing_project", "account", "impersonate_service_account", "trace_token", "user_output_enabled",
                  "flags_file")


def _gcloud_global_options(group_default: dict[str, Any]) -> list[Callable[[F], F]]:
    return [
        click.option("--flags-file", metavar="YAML_FILE",
                     help="Flags from a YAML/JSON file ({--flag: value}, or a list of them for repeated flags), "
                     "inserted where it stands, as in gcloud; see docs/reference/global-flags.md."),
        click.option("--billing-project", metavar="PROJECT",
                     help="The project billed for REST requests (mlv1, vertex): sent as X-Goog-User-Project."),
        click.option("--account", metavar="ACCOUNT",
                     help="Accepted for gcloud's command lines; aiptrain uses Application Default Credentials "
                     "(or the emulator's token), noted at --verbosity info."),
        click.option("--impersonate-service-account", metavar="SERVICE_ACCOUNT_EMAILS",
                     help="REST requests to Google (mlv1, vertex) act as this service account."),
        click.option("--trace-token", metavar="TOKEN",
                     help="Sent with each REST request (mlv1, vertex) as gcloud does: ?trace=token:TOKEN."),
        click.option("--user-output-enabled/--no-user-output-enabled", default=None,
                     help="--no-user-output-enabled: no progress lines on stderr, as -q."),
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
                 "output_format", "verbosity", "configuration", "log_http", "verbose", "quiet", *GCLOUD_GLOBALS)
        _remember_globals(click.get_current_context(), {name: kwargs.pop(name) for name in names})
        return callback(*args, **kwargs)

    decorated: Any = wrapper
    for option in reversed(_shared_options(for_group=True)):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]


def typed_before_command(name: str) -> Any:
    """The value of the shared option `name` typed before the command (`aiptrain --backend ray local
    serve`), for a command that takes the option as its own; None when none was."""
    return click.get_current_context().meta.get(_GLOBALS, {}).get(name)


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
    from aiptrain._cli.gcloud_properties import read_properties

    properties = read_properties(values["configuration"])
    values["project"] = values["project"] or properties.get("core/project")
    values["region"] = values["region"] or properties.get("compute/region") or properties.get("ai_platform/region")
    endpoint = {"mlv1": "api_endpoint_overrides/ml", "vertex": "api_endpoint_overrides/aiplatform"}
    if not values["api_endpoint"] and values["backend"] in endpoint:
        values["api_endpoint"] = properties.get(endpoint[values["backend"]])


def _request_options(values: dict[str, Any]) -> RequestOptions:
    from aiptrain._backends.base import RequestOptions

    return RequestOptions(billing_project=values["billing_project"], trace_token=values["trace_token"],
                          impersonate_service_account=values["impersonate_service_account"])


def _note_gcloud_globals(app: AppContext, values: dict[str, Any]) -> None:
    """At --verbosity info, what each gcloud global flag given does here."""
    remote = app.backend_name in ("mlv1", "vertex")
    if values["account"]:
        app.detail(f"note: --account {values['account']} is not used: aiptrain calls Google with Application "
                   "Default Credentials (`gcloud auth application-default login`), an emulator with its token")
    for name, flag in (("billing_project", "--billing-project"), ("trace_token", "--trace-token"),
                       ("impersonate_service_account", "--impersonate-service-account")):
        if values[name] and not remote:
            app.detail(f"note: {flag} has no effect on the {app.backend_name} backend: it sends no REST requests")
        elif values[name] and name == "impersonate_service_account" and app.api_endpoint:
            from aiptrain._loopback import is_loopback_url

            if is_loopback_url(app.api_endpoint):
                app.detail("note: --impersonate-service-account has no effect on a loopback endpoint: the "
                           "emulator takes its own token")


def common_options(func: F) -> F:
    """Add the shared options and pass an AppContext as the first argument."""

    @functools.wraps(func)
    def wrapper(*args: Any, backend: str, project: str | None, region: str | None, api_endpoint: str | None,
                ray_address: str | None, ray_resource_scale: float | None, output_format: str | None,
                verbosity: str | None, configuration: str | None, log_http: bool | None, verbose: int, quiet: int,
                **kwargs: Any) -> Any:
        gcloud_globals = {name: kwargs.pop(name) for name in GCLOUD_GLOBALS}
        values = _resolve(click.get_current_context(), {
            "backend": backend, "project": project, "region": region, "api_endpoint": api_endpoint,
            "ray_address": ray_address, "ray_resource_scale": ray_resource_scale, "output_format": output_format,
            "verbosity": verbosity, "configuration": configuration, "log_http": log_http, "verbose": verbose,
            "quiet": quiet, **gcloud_globals})
        _fill_from_gcloud(values)
        if values["output_format"]:
            from aiptrain._job.projection import parse_format

            parse_format(values["output_format"])  # a bad --format is refused before any work
        level = values["verbosity"]
        level_number: int = VERBOSITY_LEVELS[level] if level else values["verbose"] - values["quiet"]
        if values["user_output_enabled"] is False:
            level_number = min(level_number, -1)
        app = AppContext(
            backend_name=values["backend"],
            project=values["project"],
            api_endpoint=values["api_endpoint"],
            output_format=values["output_format"] or None,
            verbosity=level_number,
            region=values["region"],
            ray_address=values["ray_address"],
            ray_resource_scale=values["ray_resource_scale"],
            request_options=_request_options(values),
        )
        _configure_logging(2 if values["log_http"] else app.verbosity)
        _note_gcloud_globals(app, values)
        return func(app, *args, **kwargs)

    decorated: Any = wrapper
    for option in reversed(_shared_options(for_group=False)):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]
