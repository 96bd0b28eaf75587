"""The metric the test trainer reports: a known function of its arguments (tests import it too)."""

from __future__ import annotations

import math

KIND_BONUS = {"a": 0.0, "b": 0.5, "c": -0.25}


def objective(x: float, y: int, kind: str, lr: float = 1e-3) -> float:
    """Highest (1.5) at x = 0.3, y = 2, kind = b, lr = 0.001; smooth in x and log(lr), peaked in y."""
    return (1.0 - (x - 0.3) ** 2 - 0.1 * (y - 2) ** 2 + KIND_BONUS.get(kind, 0.0)
            - 0.1 * (math.log10(lr) + 3) ** 2)
