"""UTC timestamps in the RFC 3339 forms the ml v1 API and Cloud Logging use."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> datetime:
    return datetime.now(UTC)


def job_time(moment: datetime | None = None) -> str:
    """createTime/startTime/endTime: whole seconds with a `Z`, like the service."""
    return (moment or utc_now()).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def log_time(moment: datetime) -> str:
    """A fixed-width microsecond timestamp: its text order is its time order (used as a sort key)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_log_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
