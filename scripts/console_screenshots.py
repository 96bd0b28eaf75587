"""Screenshots of the console for docs/console.md: `python -m scripts.console_screenshots [OUT_DIR]`.

Starts a real `local serve` (as the browser tests do, tests/fixtures/console_jobs.py) in a
throw-away AIPTRAIN_HOME, runs a few real jobs of the console's test trainer (one that succeeds,
one that fails, one tuning job, one that writes TensorFlow summaries, one still running), opens
each page in Debian's Chromium through Playwright and writes PNGs (default: docs/images/).
Needs the `test` extra (Playwright) and /usr/bin/chromium, like the browser tests.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VIEWPORT = {"width": 1280, "height": 860}


def main(out: Path) -> None:
    from tests.fixtures.browser import chromium_missing, launched_chromium
    from tests.fixtures.console_jobs import PROJECT, build_console_trainer, console_server

    reason = chromium_missing()
    if reason is not None:
        raise SystemExit(f"cannot take the screenshots: {reason}")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="aiptrain-console-shots-") as scratch:
        root = Path(scratch)
        os.environ["AIPTRAIN_HOME"] = str(root / "home")
        # The trainers run with this interpreter (they need TensorFlow), under a neutral path: the job
        # page shows it.
        os.environ.setdefault("AIPTRAIN_LOCAL_PYTHON", str(_python_alias(root / "python")))
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
        sdist = build_console_trainer(root / "trainer")
        with console_server(root / "home", sdist) as server, launched_chromium() as browser:
            server.create("census_baseline", "--ticks", "3", labels={"team": "tabular", "stage": "baseline"})
            server.create("census_bad_flags", "--ticks", "2", "--exit-code", "3", labels={"team": "tabular"})
            server.create("mnist_curves", "--ticks", "2", "--summaries", jobDir="gs://console-bucket/jobs/mnist_curves",
                          labels={"team": "vision"})
            server.create_tuning("census_tuning", [0.0, 0.15, 0.3, 0.45, 0.6, 0.9], "--ticks", "2")
            for job_id in ("census_baseline", "census_bad_flags", "mnist_curves", "census_tuning"):
                server.wait(job_id, timeout=600)
            server.create("census_long_run", "--ticks", "100000", "--every", "0.3", labels={"team": "tabular"},
                          scaleTier="CUSTOM", masterType="n1-standard-4", workerType="n1-standard-4",
                          workerCount="2", parameterServerType="n1-standard-4", parameterServerCount="1")
            server.wait("census_long_run", {"RUNNING"})

            login = browser.new_context(viewport=VIEWPORT).new_page()
            login.goto(server.page_url("/"))
            login.screenshot(path=str(out / "console-login.png"))

            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.goto(server.console_url)
            page.wait_for_selector("tr[data-job=census_long_run]")
            page.screenshot(path=str(out / "console-jobs.png"))

            job = f"/console/projects/{PROJECT}/jobs"
            page.goto(server.page_url(f"{job}/census_long_run"))
            page.wait_for_function("document.querySelectorAll('#logs .line').length > 20", timeout=120_000)
            page.screenshot(path=str(out / "console-job.png"), full_page=True)

            page.goto(server.page_url(f"{job}/census_tuning"))
            page.locator("#trials").screenshot(path=str(out / "console-trials.png"))

            page.goto(server.page_url(f"{job}/mnist_curves"))
            page.locator("#curves").screenshot(path=str(out / "console-curves.png"))
    for name in sorted(out.glob("console-*.png")):
        print(name.relative_to(REPO) if name.is_relative_to(REPO) else name)


def _python_alias(folder: Path) -> Path:
    """This virtual environment's interpreter seen from `folder` (its pyvenv.cfg and lib/ linked there)."""
    venv = Path(sys.prefix)
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").symlink_to(sys.executable)
    (folder / "lib").symlink_to(venv / "lib")
    (folder / "pyvenv.cfg").write_bytes((venv / "pyvenv.cfg").read_bytes())
    return folder / "bin" / "python"


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "images")
