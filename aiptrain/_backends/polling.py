"""How long to wait between two polls of a job's logs and state.

Polling a REST API at a fixed interval is either slow (gcloud's 60 s: logs arrive a minute late)
or wasteful (a fixed 1 s exhausts the logging quota on a long, quiet job). `AdaptivePoller` polls
fast while lines arrive and backs off geometrically while the job is silent, with jitter so that
many followers do not poll in lockstep, and it never polls sooner than a server's `Retry-After`.

`next_delay` only computes; the caller sleeps (or, in tests, does not).

`pace_for` is a REST backend's pace: Google's APIs count every read against a quota, a server of
aiptrain's own (`local serve`, here or a team's) counts none, and is polled as quickly as a Ray
cluster is.

`retry_deadline` is the other half of waiting: a follower with --timeout sets it, and any client
that retries inside one call (the REST backends) stops retrying at it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

# (fast, ceiling) seconds between polls of the local job store: a read costs well under a
# millisecond, so a follower sees a job end within a tenth of a second.
LOCAL_POLL_SECONDS = (0.05, 0.1)

# (fast, ceiling) seconds between two polls of a REST follower (`pace_for`).
GOOGLE_PACE = (0.5, 10.0)
SERVER_PACE = (0.25, 2.0)

# time.monotonic() by which retrying calls stop sleeping and raise their last error. A follower
# with --timeout sets it, so that the retries inside one call cannot outlast the user's deadline.
_RETRY_DEADLINE: ContextVar[float | None] = ContextVar("aiptrain_retry_deadline", default=None)


@contextmanager
def retry_deadline(deadline: float | None) -> Iterator[None]:
    """Within the block, retrying calls give up rather than sleep past `deadline` (monotonic)."""
    token = _RETRY_DEADLINE.set(deadline)
    try:
        yield
    finally:
        _RETRY_DEADLINE.reset(token)


def current_retry_deadline() -> float | None:
    """The deadline set by the innermost `retry_deadline` block, if any."""
    return _RETRY_DEADLINE.get()


def pace_for(endpoint: str | None) -> tuple[float, float]:
    """Google's pace for a googleapis.com endpoint (and for none given: Google's is the default),
    a server's for any other."""
    from urllib.parse import urlsplit

    if not endpoint:
        return GOOGLE_PACE
    host = urlsplit(endpoint).hostname or ""
    return GOOGLE_PACE if host == "googleapis.com" or host.endswith(".googleapis.com") else SERVER_PACE


@dataclass
class AdaptivePoller:
    """Fast while entries arrive, doubling up to `ceiling` while idle, `Retry-After` respected.

    fast:    the delay after a poll that returned entries (and the first idle step's base)
    ceiling: the longest delay an idle job backs off to
    factor:  how much each consecutive idle poll multiplies the delay by
    jitter:  relative spread (0.1 = +/-10 %) applied to every delay, never above `ceiling`
    """

    fast: float = 0.5
    ceiling: float = 10.0
    factor: float = 2.0
    jitter: float = 0.1
    rng: random.Random = field(default_factory=random.Random, repr=False)
    _base: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.fast <= 0 or self.ceiling < self.fast:
            raise ValueError("AdaptivePoller needs 0 < fast <= ceiling")
        if self.factor < 1 or not 0 <= self.jitter < 1:
            raise ValueError("AdaptivePoller needs factor >= 1 and 0 <= jitter < 1")
        self._base = self.fast

    @property
    def current(self) -> float:
        """The un-jittered delay the last call settled on."""
        return self._base

    def reset(self) -> None:
        """Go back to the fast interval (for instance when the job changes state)."""
        self._base = self.fast

    def next_delay(self, got_entries: bool, retry_after: float | None = None) -> float:
        """Seconds to wait before the next poll.

        got_entries: the poll just made returned something new; polling stays fast.
        retry_after: the server asked us (429/503 `Retry-After`) to wait at least this long; the
                     poll counts as idle, so the back-off keeps growing as well.
        """
        if got_entries and retry_after is None:
            self._base = self.fast
        else:
            self._base = min(self._base * self.factor, self.ceiling)
        spread = self._base * self.jitter
        delay = min(self._base + self.rng.uniform(-spread, spread), self.ceiling)
        delay = max(delay, 0.0)
        if retry_after is not None and retry_after > delay:
            # The server's word wins over the ceiling: polling sooner would only be refused again.
            delay = retry_after
        return delay
