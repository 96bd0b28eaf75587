"""The choice of search algorithm for a tuning job (the interface is in `tuning.ask_tell`)."""

from __future__ import annotations

from aiptrain._job.spec import Algorithm
from aiptrain._tuning.ask_tell import Search, SearchSettings


def make_search(settings: SearchSettings) -> Search:
    """GRID_SEARCH walks the grid; RANDOM_SEARCH samples; the default is Optuna's TPE."""
    if settings.algorithm == Algorithm.GRID_SEARCH:
        from aiptrain._tuning.grid import GridSearch

        return GridSearch(settings.space, settings.history)
    from aiptrain._tuning.model_based import ModelBasedSearch

    return ModelBasedSearch(settings)
