"""Test-only fault injection: make the emulator answer some requests with 503 or 429.

Used to prove that clients survive a flaky service (retries, Retry-After). Nothing is injected
unless a plan is given to `create_app(faults=...)` or, for a server in another process, the
environment variable AIPTRAIN_EMULATOR_FAULTS holds one as JSON, for example

    [{"path": "/v2/entries:list", "status": 429, "retry_after": 1, "every": 2, "times": 3}]

path:        a regular expression searched in the request path
method:      only this HTTP method (default: any)
status:      503 (UNAVAILABLE) or 429 (RESOURCE_EXHAUSTED); any status of errors.HTTP_STATUS works
every:       fail every N-th matching request (1 = each one)
times:       stop failing after this many injected faults (default: never stop)
retry_after: seconds for the Retry-After header
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from aiptrain._emulator.errors import HTTP_STATUS, ApiError

FAULTS_ENV = "AIPTRAIN_EMULATOR_FAULTS"
_STATUS_NAMES = {code: name for name, code in HTTP_STATUS.items() if name not in ("FAILED_PRECONDITION",
                                                                                   "OUT_OF_RANGE", "ABORTED")}


@dataclass
class FaultRule:
    path: str
    status: int = 503
    method: str | None = None
    every: int = 1
    times: int | None = None
    retry_after: float | None = None
    seen: int = field(default=0, init=False)
    injected: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.status not in _STATUS_NAMES or self.every < 1:
            raise ValueError(f"bad fault rule: {self}")
        self._pattern = re.compile(self.path)

    def applies(self, method: str, path: str) -> bool:
        return (self.method is None or self.method.upper() == method.upper()) and bool(
            self._pattern.search(path))


class FaultPlan:
    """Rules checked in order for every request; thread-safe counters."""

    def __init__(self, rules: list[FaultRule]) -> None:
        self.rules = rules
        self._lock = threading.Lock()

    @classmethod
    def from_json(cls, text: str) -> FaultPlan:
        raw: Any = json.loads(text)
        items = raw if isinstance(raw, list) else [raw]
        return cls([FaultRule(**item) for item in items])

    @classmethod
    def from_environment(cls) -> FaultPlan | None:
        text = os.environ.get(FAULTS_ENV)
        return cls.from_json(text) if text else None

    def check(self, method: str, path: str) -> ApiError | None:
        """The error to answer this request with, or None to serve it normally."""
        with self._lock:
            for rule in self.rules:
                if not rule.applies(method, path):
                    continue
                if rule.times is not None and rule.injected >= rule.times:
                    continue
                rule.seen += 1
                if rule.seen % rule.every:
                    continue
                rule.injected += 1
                headers = {}
                if rule.retry_after is not None:
                    headers["Retry-After"] = f"{rule.retry_after:g}"
                status = _STATUS_NAMES[rule.status]
                return ApiError(status, f"injected fault: {status}", headers=headers)
        return None

    @property
    def injected(self) -> int:
        with self._lock:
            return sum(rule.injected for rule in self.rules)
