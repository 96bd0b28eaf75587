"""`aiptrain local ...`: run a trainer in the foreground, or serve the REST emulator."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from aiptrain._backends import DEFAULT_LOCAL_PROJECT
from aiptrain._cli.context import AppContext, common_options
from aiptrain._cli.envs import envs
from aiptrain._cli.jobs import TrainingCommand
from aiptrain._cli.numbers import DURATION
from aiptrain._emulator.defaults import DEFAULT_HOST, DEFAULT_PORT


@click.group("local")
def local() -> None:
    """Run trainers on this machine without submitting a job, serve the REST emulator, or manage
    the runtime environments local jobs run in."""


local.add_command(envs)


@local.command("train", cls=TrainingCommand)
@click.option("--package-path", type=click.Path(path_type=Path), default=".", show_default=True,
              help="The trainer package directory; replicas run from its parent.")
@click.option("--module-name", required=True, help="Module to run, e.g. trainer.task.")
@click.option("--job-dir", help="Passed to the trainer as --job-dir (gs:// paths map to the local store).")
@click.option("--distributed", is_flag=True, help="Run a cluster: chief, workers and parameter servers.")
@click.option("--worker-count", type=click.IntRange(min=0), help="Workers with --distributed (default 2).")
@click.option("--parameter-server-count", type=click.IntRange(min=0),
              help="Parameter servers with --distributed (default 2).")
@click.option("--evaluator-count", type=click.IntRange(min=0), default=0, show_default=True,
              help="Evaluators (outside the cluster).")
@click.option("--start-port", type=click.IntRange(1, 65535),
              help="First of consecutive ports (default: free ports are probed).")
@click.option("--runtime-version",
              help="Run in this runtime version's environment (default: the newest in the catalog; "
                   "AIPTRAIN_LOCAL_PYTHON without this flag runs that interpreter instead).")
@click.option("--python-version",
              help="Run on this Python, as `jobs submit training --python-version` (default: the runtime's).")
def train(package_path: Path, module_name: str, job_dir: str | None, distributed: bool,
          worker_count: int | None, parameter_server_count: int | None, evaluator_count: int,
          start_port: int | None, runtime_version: str | None, python_version: str | None) -> int:
    """Run a trainer in the foreground, each line prefixed with its task, as `gcloud ai-platform
    local train` did. Trainer arguments go after `--`."""
    from aiptrain._backends.local.local_train import run_local_training

    user_args = click.get_current_context().meta.get("user_args") or []
    if not distributed and (worker_count or parameter_server_count):
        click.echo("warning: --worker-count/--parameter-server-count are ignored without --distributed",
                   err=True)
    return run_local_training(
        package_path, module_name, job_dir=job_dir, user_args=list(user_args), distributed=distributed,
        worker_count=worker_count, parameter_server_count=parameter_server_count,
        evaluator_count=evaluator_count, start_port=start_port, out=sys.stdout, err=sys.stderr,
        runtime_version=runtime_version, python_version=python_version,
    )


@local.command("serve")
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="Port (0 picks a free one and prints it).")
@click.option("--allow-remote", is_flag=True, help="Allow a non-loopback --host (clients need the token).")
@click.option("--token", envvar="AIPTRAIN_SERVE_TOKEN",
              help="Bearer token clients must send (default: a random one, written to a 0600 file under "
              "AIPTRAIN_HOME that local clients read); prefer --token-file, since a command line is visible "
              "to every user in `ps`. [env: AIPTRAIN_SERVE_TOKEN]")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Read the bearer token from this file (its first line).")
@click.option("--no-auth", is_flag=True,
              help="Ask for no token: every local user and process can then run jobs as you.")
@click.option("--gcloud-config", "gcloud_config", metavar="NAME",
              help="Write the gcloud configuration NAME that sends gcloud's ml, aiplatform, logging and storage "
              "requests here (activate it with `gcloud config configurations activate NAME`).")
@click.option("--project", envvar=["AIPTRAIN_PROJECT", "CLOUDSDK_CORE_PROJECT"], default=DEFAULT_LOCAL_PROJECT,
              show_default=True, help="The project of the --gcloud-config configuration. [env: AIPTRAIN_PROJECT]")
@click.option("--region", envvar=["AIPTRAIN_REGION", "CLOUDSDK_COMPUTE_REGION"], default="us-central1",
              show_default=True, help="The region of the --gcloud-config configuration. [env: AIPTRAIN_REGION]")
@click.option("--grpc-port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port of the aiplatform v1 gRPC services, the Vertex AI SDK's default transport (0 picks a free "
              "one); served when grpcio and google-cloud-aiplatform are installed.")
@click.option("--no-grpc", is_flag=True, help="Do not serve gRPC.")
@click.option("--no-proxy", is_flag=True,
              help="Do not start the HTTPS proxy that answers Google's host names (ml, aiplatform, logging, storage, "
              "oauth2) for clients given `aiptrain local env`'s environment.")
@click.option("--backend", type=click.Choice(["local", "ray"]),
              help="Where the server's jobs run: this machine (local, the default) or the Ray cluster of "
              "--ray-address (ray). [env: AIPTRAIN_BACKEND, when local or ray]")
@click.option("--ray-address", envvar="AIPTRAIN_RAY_ADDRESS",
              help="--backend ray: the cluster's Ray Jobs API, e.g. http://head:8265 (else RAY_ADDRESS). "
              "[env: AIPTRAIN_RAY_ADDRESS]")
@click.option("--ray-resource-scale", type=float, envvar="AIPTRAIN_RAY_RESOURCE_SCALE",
              help="--backend ray: reserve this fraction (0-1] of each machine type's CPUs and memory. "
              "[env: AIPTRAIN_RAY_RESOURCE_SCALE]")
def serve(host: str, port: int, allow_remote: bool, token: str | None, token_file: Path | None, no_auth: bool,
          gcloud_config: str | None, project: str, region: str, grpc_port: int, no_grpc: bool,
          no_proxy: bool, backend: str | None, ray_address: str | None, ray_resource_scale: float | None) -> int:
    """Serve ml v1 jobs, Vertex AI customJobs and logging v2 entries, and a console of its jobs in the
    browser at / (the URL it prints carries the token; `aiptrain local console` opens it). Its jobs run on
    this machine, or with --backend ray on a Ray cluster (docs/team-service.md)."""
    import os
    from urllib.parse import urlsplit

    from aiptrain._cli.context import typed_before_command
    from aiptrain._emulator.gcloud_config import check_name, write_configuration
    from aiptrain._emulator.serve import JobsOn, Served, read_token_file
    from aiptrain._emulator.serve import serve as run_server

    on_command_line = click.get_current_context().get_parameter_source("token") == ParameterSource.COMMANDLINE
    if token is not None and on_command_line:
        click.echo("warning: --token on the command line is visible to every user of this machine (ps); "
                   "use --token-file FILE or AIPTRAIN_SERVE_TOKEN instead", err=True)
    if token_file is not None:
        if token is not None and on_command_line:
            raise click.UsageError("pass either --token-file or --token, not both")
        token = read_token_file(token_file)  # it wins over AIPTRAIN_SERVE_TOKEN
    if no_auth and (token or token_file):
        raise click.UsageError("--no-auth cannot be combined with --token, --token-file or AIPTRAIN_SERVE_TOKEN")
    if gcloud_config is not None:
        check_name(gcloud_config)
    backend = backend or typed_before_command("backend") or _served_backend_from_environment()
    if backend not in ("local", "ray"):
        raise click.UsageError(f"local serve runs its jobs on this machine (--backend local) or a Ray cluster "
                               f"(--backend ray), not on {backend}")
    jobs_on = JobsOn(backend == "ray", ray_address or typed_before_command("ray_address"),
                     ray_resource_scale if ray_resource_scale is not None
                     else typed_before_command("ray_resource_scale"))

    def announce(served: Served) -> None:
        url = served.url
        click.echo(f"Serving ml v1, Vertex AI customJobs and logging v2 on {url}", err=True)
        if served.ray_address is not None:
            click.echo(f"Its jobs run on the Ray cluster at {served.ray_address}; their records, logs and queue are "
                       "kept here", err=True)
            if served.ray_silent:
                click.echo(f"warning: the Ray cluster does not answer yet ({served.ray_silent}); jobs wait QUEUED "
                           "until it does", err=True)
        if served.token_file is not None:
            click.echo(f"Clients must send the bearer token in {served.token_file} (aiptrain and --gcloud-config "
                       "on this machine read it from there; elsewhere set AIPTRAIN_API_TOKEN)", err=True)
            click.echo(f"Google credentials carrying it (GOOGLE_APPLICATION_CREDENTIALS): {served.credentials_file}",
                       err=True)
        else:
            click.echo("warning: --no-auth: any process on this machine, of any user, can create jobs here and so "
                       "run code as you, and read every job, log and stored file", err=True)
        click.echo(f"The console in a browser: {served.console}  (or `aiptrain local console --port "
                   f"{urlsplit(url).port}`)", err=True)
        if served.proxy_port is not None:
            click.echo(f"Google's clients, unchanged, through its proxy on 127.0.0.1:{served.proxy_port}: "
                       f"eval \"$(aiptrain local env --port {urlsplit(url).port})\"", err=True)
        click.echo(f"Point aiptrain at it with: --backend mlv1 --api-endpoint {url}", err=True)
        if served.grpc_address is not None:
            click.echo(f"gRPC (the Vertex AI SDK's default transport) on {served.grpc_address}: "
                       f"aiplatform.init(api_endpoint=\"{served.grpc_address}\", ...) with "
                       f"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH={served.grpc_certificate}", err=True)
        elif served.grpc_missing:
            click.echo("gRPC is not served: grpcio and google-cloud-aiplatform are not installed (pip install "
                       "google-cloud-aiplatform); the Vertex AI SDK works with api_transport=\"rest\"", err=True)
        if gcloud_config is not None:
            storage = os.environ.get("STORAGE_EMULATOR_HOST")
            path = write_configuration(gcloud_config, url, project=project, region=region, storage_endpoint=storage,
                                       access_token_file=served.token_file)
            click.echo(f"gcloud configuration {gcloud_config!r} written to {path} (project {project}, region "
                       f"{region}, storage {storage or 'refused: STORAGE_EMULATOR_HOST is not set'})", err=True)
            click.echo(f"Point gcloud at it with: gcloud config configurations activate {gcloud_config}  "
                       f"(or CLOUDSDK_ACTIVE_CONFIG_NAME={gcloud_config})", err=True)

    run_server(host, port, allow_remote=allow_remote, token=token, auth=not no_auth, home=None, on_ready=announce,
               grpc_port=None if no_grpc else grpc_port, proxy=not no_proxy, project=project, jobs_on=jobs_on)
    return 0


def _served_backend_from_environment() -> str:
    """AIPTRAIN_BACKEND when it names where a server's jobs can run; a shell that set it to mlv1 or
    vertex points its clients somewhere (often at this very server), which says nothing of its jobs."""
    import os

    value = os.environ.get("AIPTRAIN_BACKEND", "").strip()
    return value if value in ("local", "ray") else "local"


@local.command("env")
@click.option("--port", type=click.IntRange(1, 65535),
              help="The port of the `aiptrain local serve` (default: the one started last).")
@click.option("--format", "output_format", type=click.Choice(["shell", "json"]), default="shell", show_default=True,
              help="shell: `export NAME=VALUE` lines, for `eval \"$(aiptrain local env)\"`; json: one object.")
def env(port: int | None, output_format: str) -> int:
    """Print the environment that sends Google's clients (the Cloud SDKs, googleapiclient, gcloud, Airflow's
    hooks, Vertex Pipelines' launcher) to a running `aiptrain local serve` through its proxy, unchanged:
    `eval "$(aiptrain local env)"`."""
    import json

    from aiptrain._emulator.client_env import environment, find_record, render_shell

    variables = environment(find_record(port, None))
    click.echo(json.dumps(variables, indent=2) if output_format == "json" else render_shell(variables), nl=False)
    if output_format == "json":
        click.echo()
    return 0


def _size(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


@local.command("prune")
@click.argument("job_ids", nargs=-1)
@click.option("--older-than", type=DURATION, metavar="DURATION",
              help="Prune every finished job (any project) that ended longer ago than this: 30d, 12h, 90m.")
@click.option("--outputs", is_flag=True,
              help="Also delete each pruned job's --job-dir under the local storage (kept by default).")
@click.option("--dry-run", is_flag=True, help="Say what would be deleted and how much it takes; delete nothing.")
@common_options
def prune_jobs(app: AppContext, job_ids: tuple[str, ...], older_than: Any, outputs: bool, dry_run: bool) -> int:
    """Delete finished local jobs: their store rows and logs, their directories, the staged packages
    no other job uses (and with --outputs their job directories under storage/), then compact the
    store so its file shrinks. JOB_IDS of the --project are pruned too. A running job is never touched."""
    from aiptrain._backends.local.job_engine import LocalJobEngine
    from aiptrain._backends.local.retention import plan_prune, prune
    from aiptrain._cli.output import emit, table
    from aiptrain.errors import UsageError

    if not job_ids and older_than is None:
        raise UsageError("nothing to prune", hint="pass --older-than DURATION (e.g. 30d) or the IDs of finished jobs")
    engine = LocalJobEngine()
    try:
        named = [(app.project_id(), job_id) for job_id in job_ids]
        plan = plan_prune(engine.store, engine.home, older_than=older_than, named=named, outputs=outputs)
        summary: dict[str, Any] = {
            "dryRun": dry_run,
            "jobs": [{"project": job.project, "jobId": job.job_id, "state": job.state, "endTime": job.ended,
                      "logBytes": job.log_bytes, "directoryBytes": job.directory_bytes} for job in plan.jobs],
            "packages": [str(path) for path in plan.packages],
            "outputs": [str(path) for path in plan.outputs],
            "kept": [{"path": str(kept.path), "reason": kept.reason} for kept in plan.kept],
            "bytes": plan.bytes_freed(),
        }
        if not dry_run:
            result = prune(engine.store, plan)
            summary.update(deleted=result.deleted, storeBytesBefore=result.store_bytes_before,
                           storeBytesAfter=result.store_bytes_after)
            summary["kept"] += [{"path": str(kept.path), "reason": kept.reason} for kept in result.kept]
    finally:
        engine.store.close()
    verb = "Would delete" if dry_run else "Deleted"
    lines = [table([[job["project"], job["jobId"], job["state"], job["endTime"] or "",
                     _size(job["logBytes"] + job["directoryBytes"])] for job in summary["jobs"]],
                   ["PROJECT", "JOB", "STATE", "ENDED", "SIZE"])] if plan.jobs else ["No finished job to prune."]
    lines.append(f"{verb} {len(plan.jobs)} job(s), {len(plan.packages)} staged package(s) and "
                 f"{len(plan.outputs)} output directory(ies): about {_size(summary['bytes'])}.")
    lines.extend(f"Kept {kept['path']}: {kept['reason']}." for kept in summary["kept"])
    if not dry_run:
        lines.append(f"The job store went from {_size(summary['storeBytesBefore'])} to "
                     f"{_size(summary['storeBytesAfter'])}.")
    emit(summary, app.output_format, text="\n".join(lines))
    return 0


@local.command("disk-usage")
@common_options
def disk_usage(app: AppContext) -> int:
    """What local jobs, their logs, runtime environments and caches take on disk."""
    from aiptrain._backends.local.disk_usage import usage
    from aiptrain._cli.output import emit, table
    from aiptrain._packaging.cache import default_cache_dir
    from aiptrain._paths import aiptrain_home

    parts = usage(aiptrain_home(), default_cache_dir())
    rows = [{"part": part.name, "path": str(part.path), "bytes": part.size, "removal": part.removal} for part in parts]
    text = table([[part.name, _size(part.size), str(part.path)] for part in parts], ["PART", "SIZE", "PATH"])
    total = sum(part.size for part in parts)
    emit({"parts": rows, "bytes": total}, app.output_format, text=f"{text}\nTotal: {_size(total)}")
    return 0


@local.command("console")
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True,
              help="The port `aiptrain local serve` listens on.")
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="The address it listens on.")
@click.option("--no-browser", is_flag=True,
              help="Print the console's URL, with its token, instead of opening a browser.")
def console(port: int, host: str, no_browser: bool) -> int:
    """Open the console of the `aiptrain local serve` on this machine in the browser, signed in with the
    server's token (read from the file it wrote; the browser's command line never shows it)."""
    import webbrowser

    from aiptrain._emulator.console.browser import console_address, open_in_browser

    address = console_address(host, port, None)
    if no_browser:
        click.echo(address.with_token)
        return 0
    open_in_browser(address, webbrowser.open)
    click.echo(f"Opened the console of {address.url} in the browser", err=True)
    return 0
