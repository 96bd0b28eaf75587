"""The transforms a `--format` key may end in (`createTime.date(tz=LOCAL)`, `name.basename()`),
as `gcloud topic projections` documents them; the few that job resources need.

Each takes the value, the positional and the keyword arguments; a value a transform does not
apply to (a number to `basename()`, a missing time to `date()`) passes through unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aiptrain.errors import UsageError


def _basename(value: Any, args: tuple[str, ...], kwargs: dict[str, str]) -> Any:
    return value.rstrip("/").rsplit("/", 1)[-1] if isinstance(value, str) else value


def _date(value: Any, args: tuple[str, ...], kwargs: dict[str, str]) -> Any:
    """An RFC 3339 time as `format` (strftime, default %Y-%m-%dT%H:%M:%S) in `tz` (LOCAL, UTC or
    the time's own zone when not given)."""
    if not isinstance(value, str) or not value:
        return value
    text = re.sub(r"(\.\d{6})\d+", r"\1", value.replace("Z", "+00:00").replace("z", "+00:00"))
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return value
    zone = kwargs.get("tz", args[1] if len(args) > 1 else "")
    if zone.upper() == "LOCAL":
        moment = moment.astimezone()
    elif zone.upper() in ("UTC", "Z"):
        moment = moment.astimezone(UTC)
    elif zone:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            moment = moment.astimezone(ZoneInfo(zone))
        except (ZoneInfoNotFoundError, ValueError):
            raise UsageError(f"--format: date(): unknown time zone {zone!r}",
                             hint="use tz=LOCAL, tz=UTC or a name such as tz=Europe/Paris") from None
    return moment.strftime(kwargs.get("format", args[0] if args else "%Y-%m-%dT%H:%M:%S"))


def _length(value: Any, args: tuple[str, ...], kwargs: dict[str, str]) -> Any:
    return 0 if value is None else len(value) if isinstance(value, (str, list, dict)) else 1


def _join(value: Any, args: tuple[str, ...], kwargs: dict[str, str]) -> Any:
    separator = kwargs.get("sep", args[0] if args else ";")
    return separator.join(str(item) for item in value) if isinstance(value, list) else value


TRANSFORMS: dict[str, Callable[[Any, tuple[str, ...], dict[str, str]], Any]] = {
    "basename": _basename,
    "date": _date,
    "join": _join,
    "len": _length,
    "lower": lambda value, args, kwargs: value.lower() if isinstance(value, str) else value,
    "upper": lambda value, args, kwargs: value.upper() if isinstance(value, str) else value,
}


def apply_transform(name: str, args: tuple[str, ...], kwargs: dict[str, str], value: Any) -> Any:
    return TRANSFORMS[name](value, args, kwargs)
