"""AdaptivePoller: fast while entries arrive, geometric back-off when idle, Retry-After wins."""

from __future__ import annotations

import random

import pytest

from aiptrain._backends.polling import AdaptivePoller


def poller(fast: float, ceiling: float) -> AdaptivePoller:
    return AdaptivePoller(fast=fast, ceiling=ceiling, jitter=0.0)


def test_stays_fast_while_entries_arrive() -> None:
    p = poller(fast=0.5, ceiling=10.0)
    assert [p.next_delay(True) for _ in range(3)] == [0.5, 0.5, 0.5]


def test_doubles_when_idle_up_to_the_ceiling() -> None:
    p = poller(fast=0.5, ceiling=10.0)
    assert [p.next_delay(False) for _ in range(7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]


def test_new_entries_reset_the_back_off() -> None:
    p = poller(fast=0.5, ceiling=10.0)
    for _ in range(5):
        p.next_delay(False)
    assert p.next_delay(True) == 0.5
    assert p.next_delay(False) == 1.0


def test_retry_after_is_a_floor_and_counts_as_idle() -> None:
    p = poller(fast=0.5, ceiling=10.0)
    assert p.next_delay(False, retry_after=3.0) == 3.0
    assert p.current == 1.0  # the back-off grows underneath
    assert p.next_delay(True, retry_after=30.0) == 30.0  # above the ceiling: the server decides
    assert p.current == 2.0  # a refused poll is not a productive one
    assert p.next_delay(False, retry_after=0.1) == 4.0


def test_jitter_stays_within_bounds_and_under_the_ceiling() -> None:
    p = AdaptivePoller(fast=1.0, ceiling=4.0, jitter=0.25, rng=random.Random(7))
    delays = [p.next_delay(got_entries=i % 3 == 0) for i in range(200)]
    assert all(0.75 <= d <= 4.0 for d in delays)
    assert len({round(d, 6) for d in delays}) > 10  # it does spread


def test_reset() -> None:
    p = poller(fast=0.5, ceiling=10.0)
    p.next_delay(False)
    p.reset()
    assert p.current == 0.5


@pytest.mark.parametrize("kwargs", [{"fast": 0}, {"fast": 5, "ceiling": 1}, {"factor": 0.5}, {"jitter": 1.5}])
def test_rejects_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        AdaptivePoller(**kwargs)  # type: ignore[arg-type]


def test_googles_apis_are_polled_gently_and_aiptrains_own_server_quickly() -> None:
    from aiptrain._backends.base import BackendSettings
    from aiptrain._backends.mlv1.backend import MlV1Backend
    from aiptrain._backends.polling import GOOGLE_PACE, SERVER_PACE, pace_for
    from aiptrain._backends.vertex.backend import VertexBackend

    assert GOOGLE_PACE[1] > SERVER_PACE[1]
    assert pace_for(None) == GOOGLE_PACE
    assert pace_for("https://ml.googleapis.com/") == GOOGLE_PACE
    assert pace_for("https://us-central1-aiplatform.googleapis.com/") == GOOGLE_PACE
    assert pace_for("http://127.0.0.1:8080/") == SERVER_PACE
    assert pace_for("https://aiptrain.example.com/") == SERVER_PACE
    assert pace_for("https://notgoogleapis.com/") == SERVER_PACE
    assert MlV1Backend(BackendSettings(project="p-project")).poll_seconds == GOOGLE_PACE
    served = BackendSettings(project="p-project", api_endpoint="http://127.0.0.1:8080/")
    assert MlV1Backend(served).poll_seconds == SERVER_PACE
    assert VertexBackend(served).poll_seconds == SERVER_PACE
    assert VertexBackend(BackendSettings(project="p-project", region="us-central1")).poll_seconds == GOOGLE_PACE
