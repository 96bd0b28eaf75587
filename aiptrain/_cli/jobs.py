"""`aiptrain jobs ...`: submit training, describe, list, cancel, stream-logs, wait.

Parse, call the domain, render. Heavy modules (pydantic models, backends, storage) are imported
inside the command bodies so `aiptrain --help` stays fast.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from aiptrain._cli.context import TYPED_OPTIONS, AppContext, common_options, global_options
from aiptrain._cli.numbers import SECONDS, SINCE, FiniteFloat
from aiptrain._submit import flags
from aiptrain._submit.flags import SUBMIT_FLAGS, Kind
from aiptrain.errors import EXIT_INTERRUPTED, ProblemList

if TYPE_CHECKING:
    from aiptrain._backends.base import Backend
    from aiptrain._job.logs import LogEntry


# click settings of the kinds that are not plain text. A count stays text here, so that
# `submit.flag_values` refuses a bad one as it refuses it from Python.
_CLICK_SETTINGS: dict[Kind, dict[str, Any]] = {
    Kind.PATH: {"type": click.Path(path_type=Path)},
    Kind.COUNT: {"metavar": "INTEGER"},
    Kind.SWITCH: {"is_flag": True, "default": None},
    Kind.LABELS: {"multiple": True},
}


def submit_flag_options(command: Any) -> Any:
    """The click options of `submit_flags.SUBMIT_FLAGS`, in the table's order."""
    for entry in reversed(SUBMIT_FLAGS):
        settings = _CLICK_SETTINGS.get(entry.kind, {})
        command = click.option(entry.flag, entry.dest, help=entry.help, **settings)(command)
    return command


class TrainingCommand(click.Command):
    """Splits USER_ARGS off at the first `--`, remembering whether there was one (gcloud's rule:
    no `--` keeps the config's args, a bare `--` clears them)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            split = args.index("--")
            ctx.meta["user_args"] = args[split + 1:]
            args = args[:split]
        else:
            ctx.meta["user_args"] = None
        return super().parse_args(ctx, args)


@click.group("jobs")
@global_options
def jobs() -> None:
    """Submit and manage training jobs."""


@jobs.group("submit")
@global_options
def submit() -> None:
    """Submit jobs."""


@submit.command("training", cls=TrainingCommand)
@click.argument("job")
@submit_flag_options
@click.option("--stream-logs", is_flag=True, help="Stream logs until the job ends; exit code follows the job.")
@click.option("--async", "async_", is_flag=True, help="Deprecated no-op: submitting is asynchronous by default.")
@click.option("--timeout", type=SECONDS, help="With --stream-logs: stop following after SECONDS (exit 12).")
@click.option("--storage", metavar="[local|gcs]", envvar="AIPTRAIN_STORAGE",
              help="Where packages are staged (default: local for --backend local, else gcs). "
              "[env: AIPTRAIN_STORAGE]")
@click.option("--dry-run", is_flag=True, help="Validate, build and print what would be sent; send nothing.")
@common_options
def training(app: AppContext, job: str, **kw: Any) -> int:
    """Submit a training job, as `gcloud ai-platform jobs submit training` did.

    Trainer arguments go after `--`: aiptrain jobs submit training JOB [flags] -- --epochs 3
    """
    from aiptrain._job.catalog import load_catalog
    from aiptrain._job.validate import runtime_warnings
    from aiptrain._submit.flag_values import build_submit_options, parse_storage
    from aiptrain._submit.staging import describe_result

    if kw["stream_logs"] and kw["async_"]:
        raise click.UsageError("--async and --stream-logs cannot be used together")
    if kw["async_"]:
        app.progress("warning: --async is deprecated: submitting is asynchronous by default; "
                     "use --stream-logs to wait.")
    ctx = click.get_current_context()
    # A --region on the command line wins over the config; one from the environment only fills a gap.
    region_given = "region" in ctx.meta.get(TYPED_OPTIONS, set())
    catalog = load_catalog()
    options, problems = build_submit_options(job, kw, catalog=catalog, project=app.project,
                                             region=app.region if region_given else None,
                                             default_region=None if region_given else app.region,
                                             user_args=ctx.meta.get("user_args"))
    storage_problems = ProblemList()
    storage = parse_storage(kw["storage"], storage_problems)
    problems += storage_problems.problems
    if kw["dry_run"]:
        from aiptrain._cli.dry_run import render_dry_run

        render_dry_run(app, app.client().dry_run_options(options, storage=storage, flag_problems=problems))
        return 0
    created = app.client().submit_options(options, storage=storage, flag_problems=problems,
                                          on_upload=lambda result: app.progress(describe_result(result)),
                                          progress_factory=_progress_factory(app),
                                          on_warning=lambda text: app.progress(f"warning: {text}"))
    for warning in runtime_warnings(created.training_input, catalog):
        app.progress(f"warning: {warning}")
    job_id = created.job_id or job
    app.progress(f"Job [{job_id}] submitted successfully.")
    if not kw["stream_logs"]:
        app.progress(_follow_up(app, job_id, active=True))
        _print_job_summary(app, created.to_api())
        return 0
    backend = app.backend(options.region or options.default_region)
    return follow_and_exit(app, backend, job_id, timeout=kw["timeout"], to_stderr=True, summary=True)


def _progress_factory(app: AppContext) -> Any:
    """A progress bar per upload on a terminal; None (no bars) otherwise."""
    if not (sys.stderr.isatty() and app.verbosity >= 0):
        return None
    from aiptrain._cli.progress import progress_bar_factory

    def progress_factory(upload_plan: Any) -> Any:
        return progress_bar_factory(upload_plan.local.name, upload_plan.size)

    return progress_factory


def _follow_up(app: AppContext, job_id: str, *, active: bool) -> str:
    lead = "Your job is still active. " if active else ""
    return (
        f"{lead}You may view the status of your job with the command\n\n"
        f"  $ aiptrain jobs describe {job_id}\n\n"
        "or continue streaming the logs with the command\n\n"
        f"  $ aiptrain jobs stream-logs {job_id}\n\n"
        "or cancel it with\n\n"
        f"  $ aiptrain jobs cancel {job_id}"
    )


# What gcloud printed after a submit (and after following a job), unless --format says otherwise.
# Absent times are left out rather than shown as null (no-undefined), as gcloud does.
SUMMARY_FORMAT = "yaml[no-undefined](jobId,state,startTime.date(tz=LOCAL),endTime.date(tz=LOCAL))"
# gcloud's `jobs list` table.
LIST_FORMAT = "table(jobId.basename(),state:label=STATUS,createTime.date(tz=LOCAL):label=CREATED)"


def _print_job_summary(app: AppContext, data: dict[str, Any]) -> None:
    """The job's jobId, state and times, as gcloud printed them; the whole resource in --format json/yaml."""
    from aiptrain._cli.output import emit

    emit(data, app.output_format, default=SUMMARY_FORMAT)


def exit_code_for(state: str | None, *, timed_out: bool = False) -> int:
    """0 SUCCEEDED, 10 FAILED, 11 CANCELLED; 12 for a timeout or a job that has not ended."""
    from aiptrain._job.state import JobState
    from aiptrain.errors import EXIT_JOB_CANCELLED, EXIT_JOB_FAILED, EXIT_JOB_TIMEOUT, EXIT_OK

    if timed_out:
        return EXIT_JOB_TIMEOUT
    return {JobState.SUCCEEDED: EXIT_OK, JobState.FAILED: EXIT_JOB_FAILED,
            JobState.CANCELLED: EXIT_JOB_CANCELLED}.get(JobState(state or "STATE_UNSPECIFIED"), EXIT_JOB_TIMEOUT)


def _interrupted(app: AppContext, job_id: str) -> int:
    app.progress("\nReceived keyboard interrupt. The job keeps running.\n" + _follow_up(app, job_id, active=True))
    return EXIT_INTERRUPTED


def _report_end(app: AppContext, job_id: str, data: dict[str, Any], *, timeout: float | None, timed_out: bool,
                unreachable: str | None = None, summary: bool) -> int:
    """How following a job ended, on stderr (and its summary on stdout); the exit code."""
    state = data.get("state")
    if timed_out and unreachable:
        # The service stopped answering: say so, rather than claim a state we could not check.
        app.progress(f"Stopped following job [{job_id}] after {timeout:g} s: the endpoint could not be "
                     f"reached ({unreachable}); the job was last seen {state}.")
    elif timed_out:
        app.progress(f"Stopped following job [{job_id}] after {timeout:g} s; it is still {state}.\n"
                     + _follow_up(app, job_id, active=True))
    elif state == "FAILED" and data.get("errorMessage"):
        from aiptrain._cli.terminal_text import for_terminal

        app.progress(f"Job [{job_id}] failed: {for_terminal(data['errorMessage'], keep_newlines=True)}")
    if summary:
        _print_job_summary(app, data)
    return exit_code_for(state, timed_out=timed_out)


def follow_and_exit(app: AppContext, backend: Backend, job_id: str, *, timeout: float | None,
                    to_stderr: bool, summary: bool, stream: bool = True, task_name: str | None = None,
                    allow_multiline: bool = False, polling_interval: float | None = None,
                    entry_lines: Callable[[LogEntry], list[str]] | None = None, since: datetime | None = None,
                    tail: int | None = None) -> int:
    """Follow a job until it ends; Ctrl-C detaches (the job keeps running) with exit 130.

    Entries print in gcloud's layout unless `entry_lines` lays them out; `since` and `tail` say
    where in the log to start."""
    from aiptrain._cli.output import format_log_entry, wants_color
    from aiptrain._job.logs import LogCursor
    from aiptrain._submit.follow import follow_job, poller_for

    out = sys.stderr if to_stderr else sys.stdout
    color = wants_color(out)

    def show(entry: LogEntry) -> None:
        lines = entry_lines(entry) if entry_lines else format_log_entry(entry, color=color,
                                                                         allow_multiline=allow_multiline)
        for line in lines:
            out.write(line + "\n")
        out.flush()

    try:
        result = follow_job(backend, job_id, on_entry=show if stream else None, task_name=task_name,
                            timeout=timeout, poller=poller_for(backend, polling_interval),
                            on_warning=lambda text: app.progress(f"warning: {text}"),
                            start=LogCursor(since, "") if since else None, tail=tail)
    except KeyboardInterrupt:
        return _interrupted(app, job_id)
    return _report_end(app, job_id, result.job.to_api(), timeout=timeout, timed_out=result.timed_out,
                       unreachable=result.unreachable, summary=summary)


def _wait_cheaply(app: AppContext, backend: Backend, job_id: str, timeout: float | None) -> int | None:
    """`jobs wait` where the backend has a wait cheaper than following the job; None where it has not."""
    try:
        result = backend.wait_for_job(job_id, timeout=timeout)
    except KeyboardInterrupt:
        return _interrupted(app, job_id)
    if result is None:
        return None
    data = result.resource
    if app.output_format is not None:
        from aiptrain._job.spec import Job

        data = Job.model_validate(data).to_api()  # the fields in the model's order, as every backend prints them
    return _report_end(app, job_id, data, timeout=timeout, timed_out=result.timed_out, summary=True)


FLATTEN = click.option("--flatten", multiple=True, metavar="KEY",
                       help="One resource per item of the list at KEY, e.g. trainingOutput.trials.")


@jobs.command("describe")
@click.argument("job")
@click.option("--summarize", is_flag=True, help="A short summary (and a trials table for tuning jobs).")
@FLATTEN
@common_options
def describe(app: AppContext, job: str, summarize: bool, flatten: tuple[str, ...]) -> int:
    """Show a job's full resource."""
    from aiptrain._cli.formats import dump_yaml
    from aiptrain._cli.output import emit

    backend = app.backend()
    found = backend.get_job(job)  # as Client.get, with the backend kept for its notes
    data = found.to_api()
    text = dump_yaml(data)
    if summarize:
        from aiptrain._cli.summary import summarize_job

        text = summarize_job(found)
    emit(data, app.output_format, text=text, flatten=flatten)
    if app.output_format is None:
        for line in backend.describe_notes(found):
            app.progress(line)
        app.progress(f"\nView logs with:\n  $ aiptrain jobs stream-logs {job}")
    return 0


@jobs.command("list")
@click.option("--filter", "filter_expr", help="gcloud's filter language, e.g. 'state=(FAILED CANCELLED) AND "
              "jobId:census*', 'NOT labels.team=nlp', 'createTime>2024-06-01'; see `aiptrain topic filters`.")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many jobs.")
@click.option("--sort-by", help="Comma-separated fields; prefix ~ for descending (e.g. ~createTime).")
@click.option("--page-size", type=click.IntRange(1, 1000), default=100, show_default=True,
              help="Jobs fetched per request.")
@click.option("--uri", is_flag=True, help="Print each job's ml v1 resource URI instead of the jobs.")
@FLATTEN
@common_options
def list_jobs(app: AppContext, filter_expr: str | None, limit: int | None, sort_by: str | None,
              page_size: int, uri: bool, flatten: tuple[str, ...]) -> int:
    """List jobs, newest first."""
    from aiptrain._cli.output import emit
    from aiptrain._job.filters import parse_filter

    job_filter = parse_filter(filter_expr)  # a bad filter is refused before the backend is asked
    if flatten:
        from aiptrain._job.listing import select_records
        from aiptrain._job.projection import flatten_resources

        # gcloud flattens first, then filters, sorts and limits the flattened records.
        records = flatten_resources([job.to_api() for job in app.backend().list_jobs(page_size=page_size)],
                                    list(flatten))
        data = select_records(records, job_filter=job_filter, limit=limit, sort_by=sort_by)
    else:
        data = [job.to_api() for job in app.client().list(filter=filter_expr, limit=limit, sort_by=sort_by,
                                                          page_size=page_size)]
    if uri:
        for record in data:
            click.echo(job_uri(app, str(record.get("jobId", ""))))
        return 0
    emit(data, app.output_format, many=True, default=LIST_FORMAT)
    if not data and _is_table(app.output_format, LIST_FORMAT):
        app.progress("Listed 0 items.")  # on stderr, so `$(aiptrain jobs list ...)` captures only jobs
    return 0


def job_uri(app: AppContext, job_id: str) -> str:
    """The job's ml v1 resource URI as gcloud's `--uri` printed it, whichever backend ran the job:
    scripts take the project and job ID from its path."""
    return f"https://ml.googleapis.com/v1/projects/{app.project_id()}/jobs/{job_id}"


def _is_table(output_format: str | None, default: str) -> bool:
    from aiptrain._job.projection import parse_format

    chosen = parse_format(output_format).merged_into(parse_format(default)) if output_format else parse_format(default)
    return chosen.name == "table"


@jobs.command("update")
@click.argument("job")
@click.option("--update-labels", multiple=True, metavar="KEY=VALUE,...", help="Add or change these labels.")
@click.option("--remove-labels", multiple=True, metavar="KEY,...",
              help="Remove these labels (absent ones are ignored).")
@click.option("--clear-labels", is_flag=True, help="Remove every label (then add --update-labels).")
@common_options
def update(app: AppContext, job: str, update_labels: tuple[str, ...], remove_labels: tuple[str, ...],
           clear_labels: bool) -> int:
    """Change a job's labels, as `gcloud ai-platform jobs update` did."""
    from aiptrain._job.catalog import load_catalog
    from aiptrain._job.label_update import label_change
    from aiptrain._job.validate import check_labels
    from aiptrain.errors import UsageError, ValidationFailed

    problems = ProblemList()
    change = label_change(flags.parse_labels(update_labels, problems, flag="--update-labels"), remove_labels,
                          clear_labels, problems)
    problems.problems += check_labels(change.update, load_catalog())
    if problems.problems:
        refused = ValidationFailed(problems.problems)
        refused.message = "the label flags are not valid"
        raise refused
    if not change.asked:
        raise UsageError("nothing to update", hint="pass --update-labels KEY=VALUE, --remove-labels KEY or "
                         "--clear-labels")
    backend = app.backend()
    if backend.labels_are_fixed:
        raise UsageError(backend.labels_are_fixed, hint="labels are set when the job is submitted (--labels)")
    current = backend.get_job(job)
    labels = change.applied_to(current.labels)
    if labels == (current.labels or {}):
        app.progress("No update to perform.")
        return 0
    updated = backend.update_labels(job, labels, etag=current.etag)
    app.progress(f"Updated job [{job}].")
    from aiptrain._cli.output import emit

    emit(updated.to_api(), app.output_format, default="yaml")
    return 0


@jobs.command("cancel")
@click.argument("job")
@common_options
def cancel(app: AppContext, job: str) -> int:
    """Cancel a job; its replicas are stopped."""
    app.client().cancel(job)
    app.progress(f"Requested cancellation of job [{job}].")
    return 0


@jobs.command("stream-logs")
@click.argument("job")
@click.option("--task-name", help="Only this replica, e.g. worker-replica-0.")
@click.option("--allow-multiline-logs", is_flag=True, help="Keep multi-line messages together.")
@click.option("--polling-interval", type=FiniteFloat(min=0.05),
              help="Fixed seconds between polls (default: adaptive).")
@click.option("--timeout", type=SECONDS, help="Stop following after SECONDS (exit 12).")
@click.option("--tail", type=click.IntRange(min=0), metavar="N",
              help="Of the lines already written, show only the last N; then follow.")
@click.option("--since", type=SINCE, metavar="DURATION|TIME",
              help="Only lines from the last DURATION (90s, 10m, 2h, 1d) or after an RFC 3339 TIME.")
@common_options
def stream_logs(app: AppContext, job: str, task_name: str | None, allow_multiline_logs: bool,
                polling_interval: float | None, timeout: float | None, tail: int | None,
                since: datetime | None) -> int:
    """Print a job's logs until it ends; the exit code follows the job.

    With --format json, one JSON object per line and entry: timestamp, severity, task, message
    (and trial for a tuning trial's lines).
    """
    from aiptrain._cli.output import entry_layout

    return follow_and_exit(app, app.backend(), job, timeout=timeout, to_stderr=False, summary=False,
                           task_name=task_name, allow_multiline=allow_multiline_logs,
                           polling_interval=polling_interval, entry_lines=entry_layout(app.output_format),
                           since=since, tail=tail)


jobs.add_command(stream_logs, name="logs")


@jobs.command("tensorboard")
@click.argument("job")
@click.option("--port", type=click.IntRange(0, 65535), default=6006, show_default=True,
              help="Port on 127.0.0.1 (0: a free one).")
@common_options
def tensorboard(app: AppContext, job: str, port: int) -> int:
    """Serve TensorBoard on a job's summaries (its job dir; a run per tuning trial) until Ctrl-C.

    Uses the TensorBoard of the job's runtime environment, else one installed on demand
    ($AIPTRAIN_HOME/tools/tensorboard). A gs:// job dir is read from the local store."""
    with app.client().tensorboard(job, port=port) as board:
        app.progress(f"TensorBoard on {board.logdir} (with {board.python}); Ctrl-C stops it.")
        click.echo(board.url)
        try:
            board.process.wait()
        except KeyboardInterrupt:
            return 0
    from aiptrain.errors import OperationalError

    raise OperationalError(f"TensorBoard exited on its own (status {board.process.returncode})")


@jobs.command("wait")
@click.argument("job")
@click.option("--timeout", type=SECONDS, help="Give up after SECONDS (exit 12).")
@common_options
def wait(app: AppContext, job: str, timeout: float | None) -> int:
    """Wait for a job to end; exit 0 if it SUCCEEDED, 10 FAILED, 11 CANCELLED, 12 timeout."""
    backend = app.backend()
    ended = _wait_cheaply(app, backend, job, timeout)
    if ended is not None:
        return ended
    return follow_and_exit(app, backend, job, timeout=timeout, to_stderr=True, summary=True, stream=False)

