"""The day a job's packages resolve as of: its runtime's cut-off, unless the job moves it.

On the service a trainer's `install_requires` were pip-installed while its runtime was current, so
an open requirement got what the index held then, never a release that came later. A runtime's
day (`Runtime.cutoff`, runtimes.yaml) is the last day of its 12 months of support. Runtimes took
jobs long after that, so a trainer that pins a release newer than the day ran after that release:
its newest pin's day is the job's (`moved_by_pin`; never past `SERVICE_END`). A job that ran later
still moves the day with the label `aiptrain-resolve-as-of` (`--labels
aiptrain-resolve-as-of=2021-06-30`) or the setting AIPTRAIN_RESOLVE_AS_OF; the label wins, and a
day either names is not moved by pins. `today` resolves against today's index, as aiptrain did
before it knew the runtimes' days.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiptrain._job.catalog import Runtime
from aiptrain.errors import UsageError

LABEL = "aiptrain-resolve-as-of"
SETTING = "AIPTRAIN_RESOLVE_AS_OF"
TODAY = "today"
_FORM = "a day as YYYY-MM-DD (e.g. 2021-06-30), or `today` for today's index"
# The last day AI Platform Training ran jobs: no trainer's pins date a job later.
SERVICE_END = datetime.date(2025, 1, 31)


@dataclass(frozen=True)
class ResolveDay:
    """The day a job's packages resolve as of (None: today's index) and what decided it."""

    day: datetime.date | None
    origin: str  # e.g. "runtime 1.15's cut-off, 12 months after its release on 2019-12-19"
    # Whether the trainer's pins may move the day forward: the runtime's day, not one a job named.
    pins_may_move: bool = False
    moved_from: str = ""  # the day the pins moved it from, as `line` says it ("": not moved)

    @property
    def exclude_newer(self) -> str | None:
        """uv's `--exclude-newer`: the first instant after the day, in UTC (a bare date would be
        read in the machine's time zone), or None for today's index."""
        return None if self.day is None else first_instant_after(self.day)

    @property
    def label(self) -> str:
        return self.day.isoformat() if self.day is not None else TODAY

    def line(self) -> str:
        """What the job's log, `jobs describe` and `--dry-run` say."""
        if self.day is None:
            return f"Trainer packages resolve against today's index ({self.origin})."
        if self.moved_from:
            return (f"Trainer packages resolve as of {self.day.isoformat()}: {self.origin}, after {self.moved_from}. "
                    f"Nothing published later is installed; set the day with the label {LABEL} or {SETTING}.")
        return (f"Trainer packages resolve as of {self.day.isoformat()} ({self.origin}): nothing published later "
                f"is installed; move the day with the label {LABEL} or {SETTING}.")

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"day": self.label, "origin": self.origin}
        if self.moved_from:
            found["movedFrom"] = self.moved_from
        if self.pins_may_move:  # a Ray node moves the day by the trainer's pins as this machine would
            found["pinsMayMove"] = True
        return found


def moved_by_pin(day: ResolveDay, pin: str, published: datetime.date) -> ResolveDay:
    """`day` moved forward to the day the trainer's pin `pin` was published, where it may move and
    that came later (to `SERVICE_END` at the latest: the service ran nothing after it)."""
    if not day.pins_may_move or day.day is None or published <= day.day or day.day >= SERVICE_END:
        return day
    if published > SERVICE_END:
        moved, why = SERVICE_END, (f"the trainer pins {pin}, published on {published.isoformat()}, and the service "
                                   f"ran its last jobs on {SERVICE_END.isoformat()}")
    else:
        moved, why = published, f"the trainer pins {pin}, published that day"
    return ResolveDay(moved, why, moved_from=f"{_what(day.origin)} ({day.day.isoformat()})")


def _what(origin: str) -> str:
    """What decided a day, without why: origins read `runtime 1.15's day: 12 months after ...`."""
    return origin.partition(":")[0]


def first_instant_after(day: datetime.date) -> str:
    """uv's `--exclude-newer` for `day`: the next midnight, in UTC (a bare date would be read in
    the machine's time zone)."""
    return f"{day + datetime.timedelta(days=1)}T00:00:00Z"


def parse_day(text: str) -> datetime.date | None:
    """`2021-06-30` -> that day; `today` -> None; anything else: ValueError saying the form."""
    value = text.strip()
    if value.lower() == TODAY:
        return None
    try:
        if len(value) != 10:
            raise ValueError(value)
        return datetime.date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{text!r} is not {_FORM}") from None


def day_problem(text: str) -> str | None:
    """Why `text` cannot move a job's day, or None."""
    try:
        parse_day(text)
    except ValueError as error:
        return str(error)
    return None


def setting_problem(env: Mapping[str, str]) -> str | None:
    """Why AIPTRAIN_RESOLVE_AS_OF (when set) cannot be used, or None."""
    value = env.get(SETTING, "").strip()
    return day_problem(value) if value else None


def check_setting(env: Mapping[str, str]) -> None:
    """A UsageError for a bad AIPTRAIN_RESOLVE_AS_OF (what `setting_problem` says)."""
    why = setting_problem(env)
    if why:
        raise UsageError(f"{SETTING}: {why}", hint=f"set {SETTING}=2021-06-30 (a day), or {SETTING}=today, or unset it")


def resolve_day(runtime: Runtime, labels: Mapping[str, str] | None, env: Mapping[str, str], *,
                stands_in: bool = False) -> ResolveDay:
    """The day a job on `runtime` resolves as of. `stands_in`: the job runs an environment that
    stands in for its runtime (the fallback, a newer Python and TensorFlow), where only today's
    index has wheels for it; a label or the setting still decides if given. Values are checked at
    submit (`day_problem`), so a bad one here is a ValueError."""
    label = (labels or {}).get(LABEL, "").strip()
    if label:
        return ResolveDay(parse_day(label), f"the job's label {LABEL}")
    setting = env.get(SETTING, "").strip()
    if setting:
        return ResolveDay(parse_day(setting), SETTING)
    if stands_in or not runtime.cutoff:
        return ResolveDay(None, f"the environment that stands in for runtime {runtime.version} has no day of its own")
    if runtime.image:  # a pre-built image (prebuilt_images.yaml): current until the framework's next release
        return ResolveDay(datetime.date.fromisoformat(runtime.cutoff),
                          f"the pre-built {runtime.version} image's day: the last before {runtime.image}'s successor",
                          pins_may_move=True)
    bound = "on or after" if runtime.released_bound else "on"
    return ResolveDay(datetime.date.fromisoformat(runtime.cutoff),
                      f"runtime {runtime.version}'s day: 12 months after its release {bound} {runtime.released}",
                      pins_may_move=True)


def from_json(data: Mapping[str, Any]) -> ResolveDay:
    """A day sent as `ResolveDay.to_json` (to a Ray node)."""
    return ResolveDay(parse_day(str(data["day"])), str(data["origin"]), pins_may_move=bool(data.get("pinsMayMove")),
                      moved_from=str(data.get("movedFrom") or ""))
