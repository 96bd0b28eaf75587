"""Row 15: the console's jobs page with 1,000 jobs in the store, against `aiptrain jobs list`.

The store is filled through its own API (`store_scale.fill_store`: finished jobs with their state
history and log lines), not by running 1,000 trainers. `aiptrain local serve` serves that home;
Debian's Chromium, launched as the browser tests launch it (tests/fixtures/browser.py), holds the console's
session cookie and opens the jobs page afresh each run. The subject is the page's first contentful
paint, measured by the browser from the start of the navigation (the server renders the rows, so
the first paint shows them); the anchor is `aiptrain jobs list` of the same home, whole command.
"""

from __future__ import annotations

import secrets
from typing import Any

from bench.context import BenchContext
from bench.environment import BenchError, aiptrain_command, isolated_env, run_checked, start_local_serve, time_command
from bench.harness import RowResult, alternate, paired_row, ratio_max
from bench.rows.store_scale import PROJECT, fill_store

RUNS = 10
JOBS = 1_000
TITLE = (f"Console: the jobs page with {JOBS:,} jobs in the store, first contentful paint in Chromium "
         "(anchor: `aiptrain jobs list` of the same store)")


def run(ctx: BenchContext) -> list[RowResult]:
    row = RowResult(row_id="15a", group="console", unit="s", title=TITLE, goal=ratio_max(2.0),
                    anchor_label="`aiptrain jobs list` of the same store, wall time")
    from tests.fixtures.browser import chromium_missing, launched_chromium

    reason = chromium_missing()
    if reason is not None:
        row.status, row.notes = "not measured", f"No browser: {reason}."
        return [row]
    home = ctx.cleanup.new_home("console")
    fill_store(home, JOBS)
    token = secrets.token_urlsafe(32)
    env = isolated_env(home, {"AIPTRAIN_SERVE_TOKEN": token})
    url = start_local_serve(ctx.cleanup, env, home / "serve.log")
    jobs_list = [*aiptrain_command(), "jobs", "list"]
    listed = run_checked(jobs_list, env=isolated_env(home)).stdout
    page_url = f"{url}console/projects/{PROJECT}/jobs"

    with launched_chromium() as browser:
        context = browser.new_context()
        signed_in = context.new_page()
        signed_in.goto(f"{url}?token={token}")
        signed_in.wait_for_selector("table.jobs", timeout=60_000)
        signed_in.close()
        shown = _first_paint(context, page_url)[1]
        if shown == 0 or listed.count("\n") <= 1:
            raise BenchError(f"the page shows {shown} jobs; `jobs list` printed {listed.count(chr(10))} lines")
        paired = alternate(lambda: _first_paint(context, page_url)[0],
                           lambda: time_command(jobs_list, env=isolated_env(home)), ctx.runs(RUNS))
    row.commands = [f"{ctx.show([*aiptrain_command(), 'local', 'serve', '--port', '0'], home=True)}   "
                    f"# home with {JOBS:,} jobs; Chromium opens /console/projects/{PROJECT}/jobs"]
    row.anchor_commands = [ctx.show(jobs_list, home=True) + "   # the same home"]
    row.notes = (f"The page shows the newest {shown} jobs (a page of the console; `jobs list` prints all "
                 f"{JOBS:,}), rendered by the server; the browser keeps the session cookie and opens the page "
                 "in a new tab each run. First contentful paint as the browser reports it "
                 "(`performance.getEntriesByType('paint')`), from the start of the navigation. One warm-up pair.")
    return [paired_row(row, paired)]


def _first_paint(context: Any, url: str) -> tuple[float, int]:
    """Seconds from the navigation's start to the first contentful paint, and the rows shown."""
    page = context.new_page()
    try:
        page.goto(url, wait_until="load")
        # Functions, not expressions: the page's content security policy forbids eval.
        page.wait_for_function("() => performance.getEntriesByName('first-contentful-paint').length > 0",
                               timeout=60_000)
        paint = page.evaluate("() => performance.getEntriesByName('first-contentful-paint')[0].startTime")
        rows = page.locator("#job-rows tr[data-job]").count()
        return float(paint) / 1000, rows
    finally:
        page.close()
