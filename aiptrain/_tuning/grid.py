"""GRID_SEARCH: every combination of the parameters' values, in one fixed order.

The order is the parameters' order in the spec, the last one varying fastest (like nested loops
written in that order), each parameter's values in increasing order (INTEGER), or in the listed
order (DISCRETE, CATEGORICAL). The job's maxTrials caps the walk: a grid bigger than maxTrials
tries its first maxTrials combinations. Combinations a resumed job already tried are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiptrain._tuning.ask_tell import PastTrial, Suggestion
from aiptrain._tuning.space import SearchSpace, grid_combination, grid_combinations_count


class GridSearch:
    def __init__(self, space: SearchSpace, history: Sequence[PastTrial] = ()) -> None:
        self._space = space
        self._size = grid_combinations_count(space.parameters)
        self._position = 0
        self._tried = {space.key(trial.values) for trial in history}

    @property
    def size(self) -> int:
        return self._size

    def ask(self) -> Suggestion | None:
        while self._position < self._size:
            values = grid_combination(self._space.parameters, self._position)
            self._position += 1
            if self._space.key(values) not in self._tried:
                return Suggestion(values, handle=self._position - 1)
        return None

    def tell(self, suggestion: Suggestion, objective: float | None) -> None:
        """A grid does not learn from results."""
