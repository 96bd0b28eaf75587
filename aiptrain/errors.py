"""The error family every layer raises; the CLI boundary turns them into exit codes.

Domain code never prints and never exits: it raises one of these. Each carries the exit code
the command ends with and, where we know one, a hint telling the user what to do next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

# Exit codes (DESIGN.md, "Exit codes"). Named once here and used everywhere.
EXIT_OK = 0
EXIT_OPERATIONAL = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_JOB_FAILED = 10
EXIT_JOB_CANCELLED = 11
EXIT_JOB_TIMEOUT = 12
EXIT_INTERRUPTED = 130


class AiptrainError(Exception):
    """Base of every error aiptrain raises on purpose."""

    exit_code: ClassVar[int] = EXIT_OPERATIONAL

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(AiptrainError):
    """The user's input is wrong; nothing was uploaded or created."""

    exit_code = EXIT_USAGE


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input: where (a dotted path or flag), what, and how to fix it."""

    path: str
    message: str
    hint: str | None = None

    def render(self) -> str:
        text = f"{self.path}: {self.message}" if self.path else self.message
        return f"{text} ({self.hint})" if self.hint else text


class ProblemList:
    """Collects Problems while a whole input is checked, so they are reported together."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, path: str, message: str, hint: str | None = None) -> None:
        self.problems.append(Problem(path, message, hint))


class ValidationFailed(UsageError):
    """Several input problems found at once, reported together."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        count = len(self.problems)
        header = "the job is not valid" if count == 1 else f"the job is not valid ({count} problems)"
        super().__init__(header)

    def __str__(self) -> str:
        return "\n".join([self.message, *(f"  - {p.render()}" for p in self.problems)])


class OperationalError(AiptrainError):
    """Network, permission, backend or storage failure."""

    exit_code = EXIT_OPERATIONAL


class JobAlreadyFinished(OperationalError):
    """Cancelling a job that already ended (the service answers FAILED_PRECONDITION)."""


class EtagMismatch(OperationalError):
    """An update names an etag the job no longer has (the service answers ABORTED)."""


class NotFound(OperationalError):
    """A job, bucket or object that does not exist."""


class AlreadyExists(OperationalError):
    """A job ID that is already taken in this project (exit 1, like the service's 409)."""


class PermissionDenied(OperationalError):
    """The caller may not do this (GCS 403, REST 403)."""


class InternalError(AiptrainError):
    """A bug in aiptrain."""

    exit_code = EXIT_INTERNAL


class TransientError(OperationalError):
    """A failure worth retrying (HTTP 429/5xx, a dropped connection); followers keep going."""

    def __init__(self, message: str, *, hint: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(message, hint=hint)
        self.retry_after = retry_after


class EndpointUnreachable(TransientError):
    """No answer at all from a service (connection refused, DNS failure, dropped connection).

    Followers tell it apart from a 429/5xx: before a job was ever found, an endpoint that does
    not answer is most likely a wrong --api-endpoint, not a passing outage.
    """


class InterruptedAfterCreate(KeyboardInterrupt):
    """Ctrl-C once the job existed: it keeps running, and the user is told how to reach it."""

    def __init__(self, job_id: str, commands: list[str]) -> None:
        super().__init__(job_id)
        self.job_id = job_id
        self.commands = commands
