"""Times as the console shows them: UTC, to the second, and durations a person reads at a glance."""

from __future__ import annotations

from datetime import UTC, datetime

from aiptrain._job.spec import Job


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 time of the API (`2025-01-31T12:00:00Z`, fractions allowed); None if absent or bad."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None


def shown_time(text: str | None) -> str:
    moment = parse_time(text)
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else ""


def job_duration(job: Job, now: datetime) -> str:
    """From the start (or creation, while queued) to the end, or to `now` while it runs."""
    start = parse_time(job.start_time) or parse_time(job.create_time)
    if start is None:
        return ""
    end = parse_time(job.end_time) or now
    return duration_text(max(0.0, (end - start).total_seconds()))


def duration_text(seconds: float) -> str:
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, seconds_left = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {seconds_left:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours:02d} h"
