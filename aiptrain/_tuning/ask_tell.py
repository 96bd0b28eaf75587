"""The ask/tell interface every search algorithm offers (`tuning.search` chooses the algorithm).

A search is asked for the next combination to try (`ask`), possibly several times before any
result comes back (trials run in parallel), and told each trial's objective value (`tell`; None
for a trial that failed or reported nothing). Trials finished earlier (a resumed job's) are
given up front as `history`: they shape the search and are never proposed again by a grid.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from aiptrain._job.spec import Algorithm
from aiptrain._tuning.plan import TuningPlan
from aiptrain._tuning.space import ParameterValue, SearchSpace


@dataclass(frozen=True)
class Suggestion:
    """A combination to try; `handle` lets the search match the later `tell` to its `ask`."""

    values: Mapping[str, ParameterValue]
    handle: int = 0


@dataclass(frozen=True)
class PastTrial:
    values: Mapping[str, ParameterValue]
    objective: float | None  # None: the trial failed or reported no metric


class Search(Protocol):
    # The next combination to try, or None when the search has nothing left to propose.
    def ask(self) -> Suggestion | None: ...

    # The result of a suggestion's trial: its objective value, or None if it has none.
    def tell(self, suggestion: Suggestion, objective: float | None) -> None: ...


@dataclass(frozen=True)
class SearchSettings:
    space: SearchSpace
    algorithm: Algorithm
    maximize: bool
    max_trials: int
    seed: int
    history: Sequence[PastTrial] = field(default_factory=tuple)

    @classmethod
    def of(cls, plan: TuningPlan, seed: int, history: Sequence[PastTrial] = ()) -> SearchSettings:
        return cls(plan.space, plan.algorithm, plan.maximize, plan.max_trials, seed, tuple(history))


def seed_for(project: str, job_id: str) -> int:
    """A job's search seed: the same job ID searches the same way, different ones differently."""
    return int.from_bytes(hashlib.sha256(f"{project}/{job_id}".encode()).digest()[:4], "big")
