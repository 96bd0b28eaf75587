"""Charts as inline SVG, drawn on the server: a tuning job's objective per trial, and scalar curves.

No chart library and no script: each chart is a few SVG elements with classes the stylesheet
colours (`series-N`, `best`), ticks at round numbers, and a `<title>` on each point that the
browser shows on hover. Pure functions of their data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aiptrain._emulator.console.html import Html, join, tag

WIDTH, HEIGHT = 640, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 12, 36
SERIES_COLOURS = 8  # series-0 .. series-7 in console.css


@dataclass(frozen=True)
class TrialPoint:
    trial_id: str
    value: float | None  # None: the trial reported no objective (failed, or still running)
    best: bool = False


@dataclass(frozen=True)
class _Scale:
    low: float
    high: float
    start: float  # pixels
    end: float

    def __call__(self, value: float) -> float:
        span = self.high - self.low
        return self.start + (value - self.low) / span * (self.end - self.start) if span else (self.start + self.end) / 2


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round values (1, 2 or 5 times a power of ten apart) covering [low, high]."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return []
    if high == low:
        return [low]
    raw = (high - low) / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(0.0 if abs(value) < step * 1e-9 else value)
        value += step
    return ticks


def number(value: float) -> str:
    return f"{value:.4g}"


def _frame(x: _Scale, y: _Scale, x_ticks: Sequence[float], y_ticks: Sequence[float], x_label: str,
           y_label: str) -> Html:
    parts = [tag("line", x1=LEFT, y1=HEIGHT - BOTTOM, x2=WIDTH - RIGHT, y2=HEIGHT - BOTTOM, class_="axis"),
             tag("line", x1=LEFT, y1=TOP, x2=LEFT, y2=HEIGHT - BOTTOM, class_="axis")]
    for value in y_ticks:
        at = round(y(value), 1)
        parts.append(tag("line", x1=LEFT, y1=at, x2=WIDTH - RIGHT, y2=at, class_="grid"))
        parts.append(tag("text", number(value), x=LEFT - 6, y=at + 4, class_="tick", text_anchor="end"))
    for value in x_ticks:
        at = round(x(value), 1)
        parts.append(tag("text", number(value), x=at, y=HEIGHT - BOTTOM + 16, class_="tick", text_anchor="middle"))
    parts.append(tag("text", x_label, x=(LEFT + WIDTH - RIGHT) / 2, y=HEIGHT - 4, class_="axis-label",
                     text_anchor="middle"))
    parts.append(tag("text", y_label, x=12, y=TOP + (HEIGHT - TOP - BOTTOM) / 2, class_="axis-label",
                     text_anchor="middle", transform=f"rotate(-90 12 {TOP + (HEIGHT - TOP - BOTTOM) / 2})"))
    return join(parts)


def _svg(label: str, content: Html, **attributes: object) -> Html:
    return tag("svg", tag("title", label), content, xmlns="http://www.w3.org/2000/svg",
               viewBox=f"0 0 {WIDTH} {HEIGHT}", role="img", aria_label=label, class_="chart", **attributes)


def _y_scale(values: Sequence[float]) -> tuple[_Scale, list[float]]:
    low, high = min(values), max(values)
    if low == high:
        low, high = low - (abs(low) or 1) * 0.1, high + (abs(high) or 1) * 0.1
    ticks = nice_ticks(low, high)
    low, high = min([low, *ticks]), max([high, *ticks])
    return _Scale(low, high, HEIGHT - BOTTOM, TOP), ticks


def objective_chart(points: Sequence[TrialPoint], *, maximize: bool, metric: str) -> Html:
    """One point per trial in trial order, and the best value so far as a step line; a trial
    without an objective sits on the x axis, hollow."""
    values = [p.value for p in points if p.value is not None]
    y, y_ticks = _y_scale(values or [0.0])
    x = _Scale(0.5, len(points) + 0.5, LEFT, WIDTH - RIGHT)
    x_ticks = [float(n) for n in range(1, len(points) + 1)] if len(points) <= 12 else \
        [t for t in nice_ticks(1, len(points)) if t == int(t)]
    best_so_far: float | None = None
    steps: list[str] = []
    marks: list[Html] = []
    for position, point in enumerate(points, start=1):
        cx = round(x(position), 1)
        if point.value is None:
            marks.append(tag("circle", tag("title", f"trial {point.trial_id}: no objective"), cx=cx,
                             cy=HEIGHT - BOTTOM, r=4, class_="trial-point missing", data_trial=point.trial_id))
            continue
        if best_so_far is None or (point.value > best_so_far if maximize else point.value < best_so_far):
            if best_so_far is not None:
                steps.append(f"{cx},{round(y(best_so_far), 1)}")  # a step: across, then up or down
            best_so_far = point.value
        steps.append(f"{cx},{round(y(best_so_far), 1)}")
        marks.append(tag("circle", tag("title", f"trial {point.trial_id}: {metric} = {number(point.value)}"),
                         cx=cx, cy=round(y(point.value), 1), r=6 if point.best else 4,
                         class_="trial-point best" if point.best else "trial-point", data_trial=point.trial_id,
                         data_value=repr(point.value)))
    line = tag("polyline", points=" ".join(steps), class_="best-so-far") if len(steps) > 1 else Html("")
    label = f"{metric} per trial ({'higher' if maximize else 'lower'} is better), with the best so far"
    return _svg(label, join([_frame(x, y, x_ticks, y_ticks, "trial", metric), line, *marks]), data_points=len(points))


def curves_chart(name: str, series: Mapping[str, Sequence[tuple[int, float]]]) -> Html:
    """One line per series (a run: the folder of an event file) of (step, value) pairs."""
    steps = [step for points in series.values() for step, _ in points]
    values = [value for points in series.values() for _, value in points]
    y, y_ticks = _y_scale(values or [0.0])
    low, high = (min(steps), max(steps)) if steps else (0, 1)
    x_ticks = nice_ticks(low, high) if high > low else [float(low)]
    x = _Scale(min([low, *x_ticks]), max([high, *x_ticks]), LEFT, WIDTH - RIGHT)
    lines = []
    for index, (run, points) in enumerate(series.items()):
        coordinates = " ".join(f"{round(x(step), 1)},{round(y(value), 1)}" for step, value in points)
        kind = f"series series-{index % SERIES_COLOURS}"
        if len(points) == 1:
            step, value = points[0]
            lines.append(tag("circle", tag("title", f"{run}: {number(value)} at step {step}"),
                             cx=round(x(step), 1), cy=round(y(value), 1), r=3, class_=kind))
        else:
            last_step, last_value = points[-1]
            lines.append(tag("polyline", tag("title", f"{run}: last {number(last_value)} at step {last_step}"),
                             points=coordinates, class_=kind, data_run=run))
    return _svg(f"{name} by step", join([_frame(x, y, x_ticks, y_ticks, "step", name), *lines]))


def legend(runs: Sequence[str]) -> Html:
    return tag("ul", *(tag("li", tag("span", class_=f"swatch series-{i % SERIES_COLOURS}"), run)
                       for i, run in enumerate(runs)), class_="legend")
