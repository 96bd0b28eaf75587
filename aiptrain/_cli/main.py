"""The `aiptrain` command and its one error boundary.

Domain code raises `AiptrainError`s; here they become `error: ...` / `hint: ...` on stderr and the
error's exit code. Commands return their exit code. Unexpected exceptions are bugs: exit 3 with
a short report (set AIPTRAIN_DEBUG=1 for the traceback).
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from typing import Any

import click

from aiptrain import __version__
from aiptrain._cli.context import global_options
from aiptrain._cli.init import init
from aiptrain._cli.jobs import jobs
from aiptrain._cli.local import local
from aiptrain._cli.topic import topic
from aiptrain.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, AiptrainError, InterruptedAfterCreate, ValidationFailed

EPILOG = """\b
Exit codes: 0 success; 1 operational error (network, permission, backend);
2 usage or validation error (nothing was uploaded or created); 3 internal error;
with --stream-logs / wait: 10 job FAILED, 11 CANCELLED, 12 still running at --timeout;
130 interrupted, 143 terminated by SIGTERM (the job keeps running);
141 the reader of the output went away (`| head`).
"""


def report_error(error: AiptrainError) -> None:
    if isinstance(error, ValidationFailed):
        click.echo(f"error: {error.message}", err=True)
        for problem in error.problems:
            click.echo(f"  - {problem.path}: {problem.message}" if problem.path else f"  - {problem.message}",
                       err=True)
            if problem.hint:
                click.echo(f"    hint: {problem.hint}", err=True)
    else:
        click.echo(f"error: {error.message}", err=True)
    if error.hint:
        click.echo(f"hint: {error.hint}", err=True)


EXIT_TERMINATED = 128 + signal.SIGTERM
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that `finally` blocks and context managers run: a
    package build's subprocess is killed and its temporary directory removed, as on Ctrl-C."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


class AiptrainGroup(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        from aiptrain._cli.flags_file import FLAG, expand_flags_files

        if any(arg == FLAG or arg.startswith(FLAG + "=") for arg in args):
            args = expand_flags_files(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            result = super().invoke(ctx)
        except AiptrainError as error:
            report_error(error)
            ctx.exit(error.exit_code)
        except InterruptedAfterCreate as interrupted:
            click.echo(f"\nInterrupted. Job [{interrupted.job_id}] was created and keeps running; "
                       "follow, inspect or cancel it with:", err=True)
            for command in interrupted.commands:
                click.echo(f"  {command}", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except KeyboardInterrupt:
            click.echo("\nInterrupted.", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except Terminated:
            click.echo("\nTerminated.", err=True)
            ctx.exit(EXIT_TERMINATED)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError:
            # The reader went away (`aiptrain jobs list | head -1`): end quietly, as `cat` does under
            # SIGPIPE, and keep Python's exit-time flush of stdout from failing again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(EXIT_BROKEN_PIPE)
        except Exception as error:
            if os.environ.get("AIPTRAIN_DEBUG"):
                raise
            click.echo(f"internal error: {type(error).__name__}: {error}", err=True)
            click.echo("".join(traceback.format_exc(limit=-3)).rstrip(), err=True)
            click.echo("hint: this is a bug in aiptrain; rerun with AIPTRAIN_DEBUG=1 for the full "
                       "traceback and report it", err=True)
            ctx.exit(EXIT_INTERNAL)
        if isinstance(result, int) and result:
            ctx.exit(result)
        return result


@click.group(cls=AiptrainGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="aiptrain")
@global_options
def root() -> None:
    """AI Platform Training jobs, the gcloud way: run them on this machine (--backend local,
    the default), on Vertex AI (--backend vertex) or on any ml v1 endpoint (--backend mlv1)."""


root.add_command(jobs)
root.add_command(local)
root.add_command(init)
root.add_command(topic)


def main() -> None:
    from aiptrain._backends.local.supervisor_start import allow_forking

    signal.signal(signal.SIGTERM, _raise_terminated)
    # A command is short-lived and single-threaded: a job it submits may get its supervisor forked
    # from it, with the job model already loaded, instead of a fresh interpreter (`local serve`
    # takes that back).
    allow_forking()
    root.main(prog_name="aiptrain")
    sys.exit(0)  # pragma: no cover - click exits itself
