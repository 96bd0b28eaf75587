"""Click types for numbers that must be finite: `nan` and `inf` parse as floats but mean nothing."""

from __future__ import annotations

import math
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
