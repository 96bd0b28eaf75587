"""Drive Google's own `gcloud` against `aiptrain local serve`.

`GcloudSession` holds one emulator started with `aiptrain local serve --gcloud-config`, a GCS
emulator for staging, a throw-away CLOUDSDK_CONFIG and a recording proxy: gcloud's HTTPS_PROXY /
HTTP_PROXY point at it with loopback excluded, so any request that would leave 127.0.0.1 (a real
Google endpoint, an update check, usage reporting) lands there, is refused and is recorded.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fixtures.emulator import make_trainer_project
from tests.fixtures.engine import wait_until
from tests.fixtures.proxy import RecordingProxy
from tests.fixtures.timed_run import run_or_explain

REPO = Path(__file__).resolve().parents[3]
CONFIG_NAME = "aiptrain-test"
PROJECT = "gcloud-project"
REGION = "us-central1"
# gcloud polls a job's log every 60 s by default (`ml_engine/polling_interval`): a test streams it every second.
FAST_POLLING = {"CLOUDSDK_ML_ENGINE_POLLING_INTERVAL": "1"}
EXECUTOR_IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest"
START_TIMEOUT = 60.0
GCLOUD_TIMEOUT = 300.0
# Seconds a replica that ignores SIGTERM keeps its job CANCELLING: long enough to observe it.
KILL_GRACE = 20

# Prints what the service gave it, reports a tuning metric when asked to, and waits for its
# peers (marker files in --sync-dir) so that every replica's lines are logged before the job ends.
TRAINER_TASK = textwrap.dedent('''
    import argparse, json, os, signal, sys, time

    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--x", type=float, default=0.5)
    parser.add_argument("--sync-dir")
    parser.add_argument("--ignore-sigterm", action="store_true", help="stay CANCELLING until SIGKILL")
    args, rest = parser.parse_known_args()
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = tf_config.get("task", {})
    me = "%s-%s" % (task.get("type"), task.get("index"))
    print("task=%s job_dir=%s job_id=%s model_dir=%s rest=%s" % (
        me, args.job_dir, os.environ.get("CLOUD_ML_JOB_ID"), os.environ.get("AIP_MODEL_DIR"), rest), flush=True)
    print("a line on stderr from %s" % me, file=sys.stderr, flush=True)
    if args.sync_dir:
        os.makedirs(args.sync_dir, exist_ok=True)
        open(os.path.join(args.sync_dir, me), "w").close()
        if task.get("type") in ("worker", "ps"):
            time.sleep(600)
        peers = ["%s-%d" % (kind, i) for kind in ("worker", "ps")
                 for i in range(len(tf_config.get("cluster", {}).get(kind, [])))]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not all(
                os.path.exists(os.path.join(args.sync_dir, p)) for p in peers):
            time.sleep(0.05)
    if os.environ.get("CLOUD_ML_HP_METRIC_FILE"):
        import hypertune
        hypertune.HyperTune().report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag="score", metric_value=args.x, global_step=1)
    time.sleep(args.sleep)
    print("done %s" % me, flush=True)
''')


def make_trainer(root: Path) -> Path:
    return make_trainer_project(root, TRAINER_TASK)


@dataclass
class Result:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def __str__(self) -> str:
        return f"$ {' '.join(self.argv)}\nexit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


VERTEX_ENDED_STATES = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")


def wait_vertex_end(gcloud: GcloudSession, collection: str, numeric: str, *, timeout: float = 180.0) -> dict[str, Any]:
    """`gcloud ai COLLECTION describe NUMERIC` until the job has ended: its document.

    gcloud's Vertex `stream-logs` (custom-jobs and hp-tuning-jobs) reads the job once, when it
    starts, and follows the log for ever if the job had not ended by then; asked after the end, it
    ends. So a test streams a Vertex job's log only once this returns.
    """
    def ended() -> dict[str, Any] | None:
        described = gcloud.run("ai", collection, "describe", numeric, "--format", "json")
        assert described.returncode == 0, str(described)
        job: dict[str, Any] = described.json()
        return job if job["state"] in VERTEX_ENDED_STATES else None

    document: dict[str, Any] = wait_until(ended, timeout=timeout, what=f"{collection} {numeric} to end")
    return document


@dataclass
class GcloudSession:
    gcloud: str
    home: Path
    cloudsdk_config: Path
    url: str
    storage_endpoint: str
    proxy: RecordingProxy
    server: subprocess.Popen[bytes]
    work: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def token(self) -> str:
        """The server's bearer token, from the file it wrote (the one gcloud's configuration names)."""
        from urllib.parse import urlsplit

        from aiptrain._paths import serve_token_path

        return serve_token_path(int(urlsplit(self.url).port or 80), self.home).read_text()

    def env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("CLOUDSDK_", "AIPTRAIN_", "GOOGLE_")) and key != "STORAGE_EMULATOR_HOST"}
        env.update({
            "CLOUDSDK_CONFIG": str(self.cloudsdk_config),
            "CLOUDSDK_ACTIVE_CONFIG_NAME": CONFIG_NAME,
            "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
            "HTTPS_PROXY": self.proxy.url, "HTTP_PROXY": self.proxy.url,
            "https_proxy": self.proxy.url, "http_proxy": self.proxy.url,
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
            "AIPTRAIN_HOME": str(self.home), "NO_COLOR": "1",
        })
        env.update(self.extra_env)
        return env

    def run(self, *args: str, cwd: Path | None = None, timeout: float = GCLOUD_TIMEOUT,
            env: dict[str, str] | None = None) -> Result:
        argv = [self.gcloud, *args]
        done = run_or_explain(argv, cwd=cwd or self.work, env={**self.env(), **(env or {})}, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        return Result(argv, done.returncode, done.stdout, done.stderr)

    def aiptrain(self, *args: str, backend: str = "mlv1") -> Result:
        """aiptrain's own CLI against the same emulator."""
        argv = [sys.executable, "-m", "aiptrain", *args, "--backend", backend, "--api-endpoint", self.url,
                "--project", PROJECT, "--region", REGION]
        env = {key: value for key, value in self.env().items() if not key.lower().endswith("_proxy")}
        done = subprocess.run(argv, cwd=self.work, env=env, capture_output=True, text=True,
                              timeout=GCLOUD_TIMEOUT, stdin=subprocess.DEVNULL)
        return Result(argv, done.returncode, done.stdout, done.stderr)

    def stop(self) -> None:
        if self.server.poll() is None:
            self.server.send_signal(signal.SIGINT)
            try:
                self.server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        self.proxy.shutdown()
        self.proxy.server_close()


def _stop_engine_jobs(home: Path) -> None:
    """Cancel whatever is still running, so no trainer outlives the module."""
    from aiptrain._backends.local.job_engine import LocalJobEngine

    engine = LocalJobEngine(home=home)
    for record in engine.store.active_jobs():
        try:
            engine.cancel(record.project, record.job_id)
        except Exception:
            pass
    deadline = time.monotonic() + 30
    while engine.store.active_jobs() and time.monotonic() < deadline:
        time.sleep(0.2)


@contextmanager
def gcloud_session(root: Path, storage_endpoint: str,
                   server_env: dict[str, str] | None = None) -> Iterator[GcloudSession]:
    """The emulator (with `server_env` on top of this process's environment) and gcloud pointed at it."""
    gcloud = shutil.which("gcloud")
    assert gcloud is not None
    home, config, work = root / "home", root / "cloudsdk", root / "work"
    for directory in (home, config, work):
        directory.mkdir(parents=True, exist_ok=True)
    proxy = RecordingProxy()
    log = root / "serve.log"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("CLOUDSDK_", "AIPTRAIN_"))},
           "AIPTRAIN_HOME": str(home), "CLOUDSDK_CONFIG": str(config), "STORAGE_EMULATOR_HOST": storage_endpoint,
           "PYTHONPATH": str(REPO), "AIPTRAIN_LOCAL_KILL_GRACE": str(KILL_GRACE), **(server_env or {})}
    with open(log, "wb") as sink:
        server = subprocess.Popen(
            [sys.executable, "-m", "aiptrain", "local", "serve", "--port", "0", "--gcloud-config", CONFIG_NAME,
             "--project", PROJECT, "--region", REGION],
            cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + START_TIMEOUT
    match = None
    while match is None:
        text = log.read_text(errors="replace")
        if "Point gcloud at it" in text:
            match = re.search(r"on (http://127\.0\.0\.1:\d+/)", text)
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            proxy.server_close()
            raise RuntimeError("aiptrain local serve did not start:\n" + text)
        time.sleep(0.1)
    session = GcloudSession(gcloud=gcloud, home=home, cloudsdk_config=config, url=match.group(1),
                            storage_endpoint=storage_endpoint, proxy=proxy, server=server, work=work)
    try:
        yield session
    finally:
        _stop_engine_jobs(home)
        session.stop()
