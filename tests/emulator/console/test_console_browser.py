"""The console in a real browser (Debian's Chromium, through Playwright) against a real `local serve`
running real jobs: what a person sees, clicks and is refused."""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from aiptrain._cli.main import root
from tests.fixtures.browser import PageLog, dialogs_accepted
from tests.fixtures.console_jobs import PROJECT, ConsoleServer

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the `browser` fixture skips, saying why
    Page = object  # type: ignore[assignment,misc]


def signed_in(page: Page, console: ConsoleServer, path: str = "") -> None:
    """Open the URL `local serve` prints (the token once), then `path` with the session cookie."""
    page.goto(console.console_url)
    expect(page.locator("h1")).to_contain_text("Jobs", timeout=TIMEOUT_MS)
    if path:
        page.goto(console.page_url(path))


def test_without_the_token_the_page_asks_for_it(console: ConsoleServer,
                                                 console_page: tuple[Page, PageLog]) -> None:
    page, _ = console_page
    answer = page.goto(console.page_url(f"/console/projects/{PROJECT}/jobs"))
    assert answer is not None and answer.status == 401
    expect(page.locator("h1")).to_contain_text("asks for its server's token")
    assert page.context.cookies() == []
    page.fill("input[name=token]", "not-the-token")
    page.click("form.login button")
    expect(page.locator("p.error")).to_contain_text("not this server's token")
    assert page.context.cookies() == []
    page.fill("input[name=token]", console.token)
    page.click("form.login button")
    expect(page.locator("h1")).to_contain_text(f"Jobs {PROJECT}")
    assert "token" not in page.url, "the token leaves the address bar once exchanged"
    [cookie] = page.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert console.token not in cookie["value"]
    # Without the cookie, the API's data stays closed to the page's origin as well.
    assert httpx.get(console.page_url(f"/v1/projects/{PROJECT}/jobs")).status_code == 401


def test_the_list_shows_the_jobs_filters_them_and_follows_the_store(
        console: ConsoleServer, console_page: tuple[Page, PageLog]) -> None:
    page, _ = console_page
    console.create("list_ok", "--ticks", "1", labels={"team": "nlp"})
    console.create("list_failed", "--ticks", "1", "--exit-code", "3", labels={"team": "vision"})
    console.wait("list_ok")
    console.wait("list_failed")
    signed_in(page, console)
    rows = page.locator("#job-rows tr")
    expect(page.locator("tr[data-job=list_ok] .state")).to_have_text("SUCCEEDED")
    expect(page.locator("tr[data-job=list_failed] .state")).to_have_text("FAILED")
    expect(page.locator("tr[data-job=list_ok]")).to_contain_text("team=nlp")
    # gcloud's filter language, through the engine's own filter.
    page.fill("input[name=filter]", "labels.team=vision AND state=FAILED")
    page.click("form.filter button")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-job", "list_failed")
    page.fill("input[name=filter]", "state=")
    page.click("form.filter button")
    expect(page.locator("p.error")).to_be_visible()
    # A failed job's page: its errorMessage first, its log narrowed by severity.
    page.goto(console.page_url(f"/console/projects/{PROJECT}/jobs/list_failed"))
    expect(page.locator(".error-message")).to_contain_text(console.job("list_failed")["errorMessage"][:40])
    expect(page.locator("#logs .msg", has_text="tick 0")).to_be_visible(timeout=TIMEOUT_MS)
    page.select_option("#logs select[name=severity]", "ERROR")
    expect(page.locator("#logs .msg", has_text="giving up on purpose")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#logs .msg", has_text="tick 0")).to_have_count(0)
    assert set(page.locator("#logs .sev").all_text_contents()) <= {"ERROR", "CRITICAL", "ALERT", "EMERGENCY"}
    # A job created while the page is open appears without a reload.
    page.goto(console.page_url(f"/console/projects/{PROJECT}/jobs"))
    expect(page.locator("tr[data-job=list_ok]")).to_be_visible()
    console.create("list_later", "--ticks", "1")
    expect(page.locator("tr[data-job=list_later]")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("tr[data-job=list_later] .state")).to_have_text("SUCCEEDED", timeout=TIMEOUT_MS)


def test_a_vertex_custom_job_shows_as_vertex_with_its_own_resource(
        console: ConsoleServer, console_page: tuple[Page, PageLog]) -> None:
    page, _ = console_page
    created = console.create_custom_job("console vertex", "--ticks", "1")
    signed_in(page, console)
    row = page.locator("#job-rows tr", has=page.locator("td span", has_text=re.compile("^vertex$")))
    expect(row).to_have_count(1, timeout=TIMEOUT_MS)
    row.locator("a").click()
    expect(page.locator("#overview")).to_contain_text(created["name"])
    page.click("#resource summary")
    expect(page.locator("#resource pre")).to_contain_text('"displayName": "console vertex"')
    expect(page.locator("#replicas")).to_contain_text("workerpool0-0")


def test_a_running_jobs_log_lines_appear_live_and_cancel_ends_it(
        console: ConsoleServer, console_page: tuple[Page, PageLog]) -> None:
    page, _ = console_page
    console.create("live", "--ticks", "100000", "--every", "0.2")
    console.wait("live", {"RUNNING"})
    signed_in(page, console, f"/console/projects/{PROJECT}/jobs/live")
    lines = page.locator("#logs .log-lines .line")
    expect(lines.filter(has_text=re.compile(r"tick \d+"))).not_to_have_count(0, timeout=TIMEOUT_MS)
    last_seen = _last_tick(page)
    # No reload: the server-sent events bring lines written after the page was rendered.
    page.wait_for_function("n => [...document.querySelectorAll('#logs .msg')].some("
                           "e => /^tick (\\d+)$/.test(e.textContent) && Number(RegExp.$1) > n + 5)",
                           arg=last_seen, timeout=TIMEOUT_MS)
    expect(page.locator("#replicas")).to_contain_text("running")
    dialogs_accepted(page)
    page.click("#cancel")
    expect(page.locator("#job-title .state")).to_have_text("CANCELLED", timeout=TIMEOUT_MS)
    expect(page.locator("#cancel")).to_be_hidden()
    assert console.job("live")["state"] == "CANCELLED"
    expect(page.locator("#logs")).to_have_attribute("data-ended", "true", timeout=TIMEOUT_MS)


def test_a_long_log_opens_on_its_last_page_and_pages_back_to_its_start(
        console: ConsoleServer, console_page: tuple[Page, PageLog]) -> None:
    page, _ = console_page
    console.create("long_log", "--ticks", "1200")
    assert console.wait("long_log")["state"] == "SUCCEEDED"
    signed_in(page, console, f"/console/projects/{PROJECT}/jobs/long_log")
    expect(page.locator("#logs")).to_have_attribute("data-ended", "true", timeout=TIMEOUT_MS)
    lines = page.locator("#logs .line")
    expect(lines).to_have_count(500)  # one page, not the whole log
    expect(page.locator("#logs .msg", has_text=re.compile(r"^tick 1199$"))).to_have_count(1)
    earlier = page.locator("#logs button.earlier")
    while earlier.is_visible():
        shown = lines.count()
        earlier.click()
        expect(lines).not_to_have_count(shown)
    ticks = [text for text in page.locator("#logs .msg").all_text_contents() if re.fullmatch(r"tick \d+", text)]
    assert ticks == [f"tick {n}" for n in range(1200)], "every line once, in order"


def _last_tick(page: Page) -> int:
    texts = page.locator("#logs .msg").all_text_contents()
    return max(int(match[1]) for text in texts if (match := re.fullmatch(r"tick (\d+)", text)))


def test_a_tuning_jobs_chart_has_one_point_per_trial(console: ConsoleServer,
                                                     console_page: tuple[Page, PageLog]) -> None:
    page, _ = console_page
    xs = [0.0, 0.3, 0.6, 0.9]
    console.create_tuning("tuned", xs, "--ticks", "1")
    done = console.wait("tuned")
    assert done["state"] == "SUCCEEDED", done
    signed_in(page, console, f"/console/projects/{PROJECT}/jobs/tuned")
    points = page.locator("#trials svg circle.trial-point")
    expect(points).to_have_count(len(xs))
    best_trial = next(t["trialId"] for t in done["trainingOutput"]["trials"]
                      if float(t["hyperparameters"]["x"]) == 0.3)
    expect(page.locator("#trials svg circle.trial-point.best")).to_have_attribute("data-trial", best_trial)
    expect(page.locator("#trials tr.best")).to_have_attribute("data-trial", best_trial)
    # Sorting by the objective, twice: highest first.
    score = page.locator("#trials th button.sort", has_text="score")
    score.click()
    score.click()
    expect(page.locator("#trials tbody tr").first).to_have_attribute("data-trial", best_trial)


def test_a_foreign_origin_is_refused(console: ConsoleServer, console_page: tuple[Page, PageLog]) -> None:
    page, _ = console_page
    console.create("target", "--ticks", "100000", "--every", "0.5")
    console.wait("target", {"RUNNING"})
    signed_in(page, console)  # the browser holds the session cookie, as a user's would
    cancel = console.page_url(f"/console/projects/{PROJECT}/jobs/target/cancel")
    with foreign_site() as foreign:
        page.goto(foreign)
        with page.expect_response(cancel) as answered:
            page.evaluate("url => fetch(url, {method: 'POST', mode: 'no-cors', credentials: 'include'})"
                          ".catch(() => null)", cancel)
        assert answered.value.status == 403
        read = page.evaluate("url => fetch(url, {credentials: 'include'}).then(r => 'read', () => 'blocked')",
                             console.page_url(f"/console/projects/{PROJECT}/jobs"))
        assert read == "blocked"
    assert console.job("target")["state"] == "RUNNING"
    # Its own pages may cancel, with the session's CSRF token; without it, not even the same origin.
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    refused = httpx.post(cancel, cookies=cookies, headers={"Origin": console.url.rstrip("/")})
    assert refused.status_code == 403 and "CSRF" in refused.text
    assert console.job("target")["state"] == "RUNNING"
    # A DNS-rebinding page (another name for this address) cannot read the console, cookie or not.
    rebound = httpx.get(console.page_url(f"/console/projects/{PROJECT}/jobs"), cookies=cookies,
                        headers={"Host": "rebinding.example:80"})
    assert rebound.status_code == 400 and "target" not in rebound.text


def foreign_site() -> _ForeignSite:
    return _ForeignSite()


class _ForeignSite:
    """Another site on this machine (another port of loopback: the same site for cookies, another origin)."""

    def __enter__(self) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = b"<!doctype html><title>another site</title><p>another site"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_local_console_opens_the_console_signed_in(console: ConsoleServer, console_page: tuple[Page, PageLog],
                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page, _ = console_page
    monkeypatch.setenv("AIPTRAIN_HOME", str(console.emulator.home))
    opened = tmp_path / "opened"
    monkeypatch.setenv("BROWSER", f"sh -c 'printf %s \"$0\" > {opened}' %s")
    result = CliRunner().invoke(root, ["local", "console", "--port", str(console.emulator.port)])
    assert result.exit_code == 0, result.output
    target = opened.read_text()
    assert target.startswith("file://") and console.token not in target, "no token on a command line"
    page.goto(target)
    expect(page.locator("h1")).to_have_text(re.compile(r"^Jobs "), timeout=TIMEOUT_MS)
    assert [cookie["name"] for cookie in page.context.cookies()] == [f"aiptrain-console-{console.emulator.port}"]
    printed = CliRunner().invoke(root, ["local", "console", "--port", str(console.emulator.port), "--no-browser"])
    assert printed.output.strip() == console.console_url
