"""Google's error responses: `{"error": {"code", "message", "status", "details"}}`.

Handlers raise `ApiError`; the app turns it into the JSON body and HTTP status Google's front end
would send, so any googleapiclient-based client sees the errors it sees from the real service.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from aiptrain._emulator.schema import Violation, snake_case
from aiptrain.errors import (
    AiptrainError,
    AlreadyExists,
    JobAlreadyFinished,
    NotFound,
    PermissionDenied,
    Problem,
    TransientError,
    UsageError,
    ValidationFailed,
)

# google.rpc.Code name -> HTTP status.
HTTP_STATUS = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "ABORTED": 409,
    "RESOURCE_EXHAUSTED": 429,
    "CANCELLED": 499,
    "DEADLINE_EXCEEDED": 408,  # only a client too slow to send its request (limits.py) gets it
    "INTERNAL": 500,
    "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503,
}
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"


@dataclass
class ApiError(Exception):
    status: str
    message: str
    violations: Sequence[Violation] = field(default_factory=tuple)
    headers: dict[str, str] = field(default_factory=dict)
    # An HTTP status that no google.rpc code maps to (405, 415), where the front end sends one.
    http_code: int | None = None

    @property
    def http_status(self) -> int:
        return self.http_code or HTTP_STATUS[self.status]

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.http_status, "message": self.message, "status": self.status}
        if self.violations:
            error["details"] = [{
                "@type": BAD_REQUEST_TYPE,
                "fieldViolations": [{"field": v.field, "description": v.description} for v in self.violations],
            }]
        return {"error": error}


def invalid_argument(violations: Sequence[Violation]) -> ApiError:
    message = "\n".join(v.description for v in violations) if violations else "Invalid argument."
    return ApiError("INVALID_ARGUMENT", message, tuple(violations))


def field_error(field_path: str, description: str, status: str = "INVALID_ARGUMENT") -> ApiError:
    """One field's problem, worded as the service words it: `Field: job_id Error: ...`."""
    return ApiError(status, f"Field: {field_path} Error: {description}", (Violation(field_path, description),))


def _problem_field(problem: Problem, root: str) -> str:
    """`trainingInput.masterType` -> `job.training_input.master_type`."""
    if not problem.path:
        return root
    parts = [snake_case(part) for part in problem.path.split(".")]
    return ".".join([root, *parts])


def from_aiptrain_error(error: AiptrainError, *, root: str) -> ApiError:
    """The API error the engine's refusal becomes."""
    if isinstance(error, ValidationFailed):
        from aiptrain._emulator.admission import CannotRunHere

        violations = [Violation(_problem_field(p, root), p.message + (f" ({p.hint})" if p.hint else ""))
                      for p in error.problems]
        if isinstance(error, CannotRunHere):  # the request is right; this machine cannot run it
            return ApiError("FAILED_PRECONDITION", "\n".join(v.description for v in violations), tuple(violations))
        return invalid_argument(violations)
    if isinstance(error, JobAlreadyFinished):
        return ApiError("FAILED_PRECONDITION", error.message)
    if isinstance(error, NotFound):
        return ApiError("NOT_FOUND", error.message)
    if isinstance(error, AlreadyExists):
        return ApiError("ALREADY_EXISTS", error.message)
    if isinstance(error, PermissionDenied):
        return ApiError("PERMISSION_DENIED", error.message)
    if isinstance(error, UsageError):
        return ApiError("INVALID_ARGUMENT", error.message + (f" ({error.hint})" if error.hint else ""))
    if isinstance(error, TransientError):
        return ApiError("UNAVAILABLE", error.message)
    return ApiError("INTERNAL", error.message)
