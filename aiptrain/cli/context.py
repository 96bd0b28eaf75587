"""Options every command shares, and the context object built from them.

Each option can also come from an `AIPTRAIN_*` environment variable (named in its help), so a
CI pipeline sets them once. They are accepted after the command name, where gcloud users put them.
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
    output_format: str
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



def common_options(func: F) -> F:
    """Add the shared options and pass an AppContext as the first argument."""

    @click.option("--backend", envvar="AIPTRAIN_BACKEND", default="local", show_default=True,
                  type=click.Choice(["local", "ray", "vertex", "mlv1"]),
                  help="Where jobs run. [env: AIPTRAIN_BACKEND]")
    @click.option("--project", envvar=["AIPTRAIN_PROJECT", "CLOUDSDK_CORE_PROJECT"],
                  help="Project ID (default for local: local-project). [env: AIPTRAIN_PROJECT]")
    @click.option("--region", envvar=["AIPTRAIN_REGION", "CLOUDSDK_COMPUTE_REGION"],
                  help="Region (Vertex AI endpoint; a submit's job region). [env: AIPTRAIN_REGION]")
    @click.option("--api-endpoint", envvar="AIPTRAIN_API_ENDPOINT",
                  help="REST endpoint for mlv1/vertex, e.g. http://127.0.0.1:8080/ for `aiptrain local serve`."
                  " [env: AIPTRAIN_API_ENDPOINT]")
    @click.option("--ray-address", envvar="AIPTRAIN_RAY_ADDRESS",
                  help="Ray Jobs API of the cluster for --backend ray, e.g. http://127.0.0.1:8265 (else RAY_ADDRESS)."
                  " [env: AIPTRAIN_RAY_ADDRESS]")
    @click.option("--ray-resource-scale", type=float, envvar="AIPTRAIN_RAY_RESOURCE_SCALE",
                  help="--backend ray: reserve this fraction (0-1] of each machine type's CPUs and memory."
                  " [env: AIPTRAIN_RAY_RESOURCE_SCALE]")
    @click.option("--format", "output_format", envvar="AIPTRAIN_FORMAT", default="text", show_default=True,
                  type=click.Choice(["text", "json", "yaml"]), help="Result format on stdout. [env: AIPTRAIN_FORMAT]")
    @click.option("-v", "--verbose", count=True, help="More detail on stderr (repeatable).")
    @click.option("-q", "--quiet", count=True, help="Less output on stderr.")
    @functools.wraps(func)
    def wrapper(*args: Any, backend: str, project: str | None, region: str | None, api_endpoint: str | None,
                ray_address: str | None, ray_resource_scale: float | None,
                output_format: str, verbose: int, quiet: int, **kwargs: Any) -> Any:
        app = AppContext(
            backend_name=backend,
            project=project,
            api_endpoint=api_endpoint,
            output_format=output_format,
            verbosity=verbose - quiet,
            region=region,
            ray_address=ray_address,
            ray_resource_scale=ray_resource_scale,
        )
        _configure_logging(app.verbosity)
        return func(app, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
