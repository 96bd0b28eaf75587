"""Test harness for the REST layer: a real emulator process, a trainer package, job helpers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fixtures.engine import wait_until

__all__ = ["wait_until"]

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}

TRAINER_TASK = textwrap.dedent('''
    """A tiny trainer: prints lines tagged with its TF_CONFIG task, sleeps, exits as told."""
    import argparse
    import json
    import os
    import sys
    import time

    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir")
    parser.add_argument("--lines", type=int, default=3)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--exit-code", type=int, default=0)
    parser.add_argument("--await-peers", action="store_true",
                        help="the chief starts only once every worker and ps has printed its line")
    args, _ = parser.parse_known_args()
    # A gs:// --job-dir arrives unchanged; the markers below are plain files, kept where the
    # local store would keep that folder so every replica sees the same ones.
    marks = args.job_dir
    if marks and marks.startswith("gs://"):
        marks = os.path.join(os.environ["AIPTRAIN_HOME"], "storage", marks[len("gs://"):])
    tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = tf_config.get("task", {})
    me = "%s-%s" % (task.get("type"), task.get("index"))
    if task.get("type") in ("worker", "ps"):
        print("%s waiting" % me, flush=True)
        if marks:
            os.makedirs(marks, exist_ok=True)
            open(os.path.join(marks, me + ".ready"), "w").close()
        time.sleep(600)
    if args.await_peers:
        # Without this the chief can finish, and the job end, before a worker's interpreter starts.
        peers = ["%s-%d" % (kind, i) for kind in ("worker", "ps")
                 for i in range(len(tf_config.get("cluster", {}).get(kind, [])))]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
                os.path.exists(os.path.join(marks, p + ".ready")) for p in peers):
            time.sleep(0.05)
    for i in range(args.lines):
        print("line %d from %s" % (i, me), flush=True)
    print("job-dir=%s" % args.job_dir, flush=True)
    time.sleep(args.sleep)
    if args.exit_code:
        print("failing on purpose", file=sys.stderr, flush=True)
    sys.exit(args.exit_code)
''')


def make_trainer_project(root: Path, task_source: str = TRAINER_TASK) -> Path:
    """A package directory `root/trainer` with `trainer.task` (the tiny trainer above by default)."""
    package = root / "trainer"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text(task_source)
    return package


@dataclass
class Emulator:
    url: str
    home: Path
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def storage(self) -> Path:
        return self.home / "storage"

    @property
    def port(self) -> int:
        from urllib.parse import urlsplit

        return int(urlsplit(self.url).port or 80)

    @property
    def token(self) -> str | None:
        """The bearer token the server asks for, read from the file it wrote, as a user would."""
        from aiptrain.paths import serve_token_path

        path = serve_token_path(self.port, self.home)
        return path.read_text() if path.exists() else None

    def credentials(self) -> Any:
        """google-auth credentials carrying the token, for a discovery client built by hand."""
        from google.oauth2.credentials import Credentials

        return Credentials(token=self.token)

    def auth_headers(self) -> dict[str, str]:
        token = self.token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def stage(self, local: Path, uri: str) -> str:
        """Put a file in the emulator's local store at `uri` (gs://BUCKET/PATH)."""
        target = self.storage / uri.removeprefix("gs://")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, target)
        return uri

    def engine(self) -> Any:
        from aiptrain.backends.local.engine import LocalEngine

        return LocalEngine(home=self.home)

    def stop(self) -> None:
        _stop_jobs(self)
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def server_log(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def _stop_jobs(emulator: Emulator) -> None:
    """Cancel whatever a test left running, and wait for it, so no process outlives the test."""
    engine = emulator.engine()
    for project_dir in _projects(engine):
        jobs, _ = engine.list(project_dir, page_size=1000)
        for job in jobs:
            if job.state is not None and job.state.value not in TERMINAL:
                try:
                    engine.cancel(project_dir, job.job_id)
                except Exception:
                    pass
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not engine.store.active_jobs():
            return
        time.sleep(0.2)


def _projects(engine: Any) -> list[str]:
    rows = engine.store._read("SELECT DISTINCT project FROM jobs")
    return [row["project"] for row in rows]


def start_emulator(home: Path, *, token: str | None = None, faults: list[dict[str, Any]] | None = None,
                   env: dict[str, str] | None = None, no_auth: bool = False) -> Emulator:
    home.mkdir(parents=True, exist_ok=True)
    url_file = home / "emulator.url"
    url_file.unlink(missing_ok=True)
    log = home / "emulator.log"
    argv = [sys.executable, "-m", "tests.rest.emulator_main", "--home", str(home), "--url-file", str(url_file)]
    if token:
        argv += ["--token", token]
    if no_auth:
        argv += ["--no-auth"]
    if faults:
        argv += ["--faults", json.dumps(faults)]
    process_env = {**os.environ, **(env or {}), "AIPTRAIN_HOME": str(home)}
    with open(log, "wb") as sink:
        process = subprocess.Popen(argv, cwd=REPO, env=process_env, stdout=sink, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT
    while not url_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("the emulator did not start:\n" + log.read_text(errors="replace"))
        time.sleep(0.05)
    return Emulator(url=url_file.read_text(), home=home, process=process, log=log)


@contextmanager
def running_emulator(home: Path, **kwargs: Any) -> Iterator[Emulator]:
    emulator = start_emulator(home, **kwargs)
    try:
        yield emulator
    finally:
        emulator.stop()
