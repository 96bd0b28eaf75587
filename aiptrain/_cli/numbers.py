"""Click types for numbers that must be finite: `nan` and `inf` parse as floats but mean nothing."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import click


class FiniteFloat(click.FloatRange):
    """A FloatRange that also refuses `nan`, `inf` and `-inf` (which compare false with any bound)."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if isinstance(number, float) and not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number of seconds.", param, ctx)
        return number


SECONDS = FiniteFloat(min=0)


class Since(click.ParamType[datetime, Any]):
    """`--since`: how far back (`90s`, `10m`, `2h`, `1d`) or an RFC 3339 time; a UTC datetime."""

    name = "duration or time"
    UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, datetime):
            return value
        text = str(value).strip()
        number, unit = text[:-1], text[-1:].lower()
        if unit in self.UNITS and number.isdigit():
            return datetime.now(UTC) - timedelta(seconds=int(number) * self.UNITS[unit])
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            self.fail(f"{text!r} is neither a duration like 10m, 2h or 1d nor a time like 2024-06-01T12:00:00Z.",
                      param, ctx)
        return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


SINCE = Since()


class Duration(click.ParamType[timedelta, Any]):
    """A length of time: `90s`, `10m`, `2h`, `30d`."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, timedelta):
            return value
        text = str(value).strip()
        number, unit = text[:-1], text[-1:].lower()
        if unit not in Since.UNITS or not number.isdigit():
            self.fail(f"{text!r} is not a duration like 90s, 10m, 2h or 30d.", param, ctx)
        return timedelta(seconds=int(number) * Since.UNITS[unit])


DURATION = Duration()
