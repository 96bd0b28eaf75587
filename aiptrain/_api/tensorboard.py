"""`aiptrain jobs tensorboard`: a TensorBoard process over a job's summaries.

What it shows: the job's job dir, which holds its summaries and, for a tuning job, one folder per
trial (JOB_DIR/TRIAL_ID), each a TensorBoard run. A `gs://` job dir is read where this machine
keeps it: the local store ($AIPTRAIN_HOME/storage) for the local backend and for whatever the
local store holds (jobs of `local serve`, Ray jobs on this machine); any other `gs://` goes to
TensorBoard as it is (it reads Cloud Storage when TensorFlow is installed beside it).

Which TensorBoard: the job's runtime environment's, when it has one (local jobs; it runs the same
versions the trainer wrote with); else one installed on demand with uv into
$AIPTRAIN_HOME/tools/tensorboard, reused (offline) afterwards.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from aiptrain._paths import HomeLayout
from aiptrain.errors import OperationalError, UsageError

_URL = re.compile(r"(http://[^\s]+:\d+/)")
START_TIMEOUT_SECONDS = 180.0  # TensorBoard imports TensorFlow when it is installed: slow on a busy machine


@dataclass(frozen=True)
class Board:
    url: str
    logdir: str
    python: str
    process: subprocess.Popen[bytes]


def logdir_for(job_dir: str | None, job_id: str) -> str:
    """Where the job's summaries are, for TensorBoard (a local path, or a gs:// URI it must read)."""
    if not job_dir:
        raise UsageError(f"job [{job_id}] has no job dir: TensorBoard has no summaries to read",
                         hint="submit with --job-dir (the trainer writes its summaries under it)")
    if not job_dir.startswith("gs://"):
        return job_dir
    local = HomeLayout.of().storage / job_dir.removeprefix("gs://")
    return str(local) if local.exists() else job_dir


def tensorboard_python(job_python: str | None) -> str:
    """An interpreter that can run TensorBoard: the job's, else the on-demand one (installed now if needed)."""
    if job_python and _has_tensorboard(job_python):
        return job_python
    tools = HomeLayout.of().tools / "tensorboard"
    python = tools / "bin" / "python"
    if python.exists() and _has_tensorboard(str(python)):
        return str(python)
    _install(tools)
    return str(python)


def _has_tensorboard(python: str) -> bool:
    try:
        done = subprocess.run([python, "-c", "import tensorboard"], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _install(tools: Path) -> None:
    from aiptrain._environments.uv import uv_binary, uv_environment

    env = uv_environment(dict(os.environ))
    for argv in ([uv_binary(), "venv", "--quiet", "--python", sys.executable, str(tools)],
                 [uv_binary(), "pip", "install", "--quiet", "--python", str(tools / "bin" / "python"), "tensorboard"]):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise OperationalError(f"cannot install TensorBoard into {tools}: {done.stderr.strip()[-500:]}",
                                   hint="check the network (PyPI), or install tensorboard into the job's environment")


@contextmanager
def running_tensorboard(python: str, logdir: str, *, port: int = 0, host: str = "127.0.0.1") -> Iterator[Board]:
    """TensorBoard serving `logdir` on host:port (0: a free port) until the block ends."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    argv = [python, "-m", "tensorboard.main", "--logdir", logdir, "--host", host, "--port", str(port)]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    try:
        url = _wait_for_url(process)
        yield Board(url=url, logdir=logdir, python=python, process=process)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _wait_for_url(process: subprocess.Popen[bytes]) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = process.stdout.readline().decode(errors="replace")
        if not line and process.poll() is not None:
            break
        seen.append(line.rstrip())
        found = _URL.search(line)
        if found:
            return found.group(1)
    raise OperationalError("TensorBoard did not start: " + " / ".join(seen[-5:]),
                           hint="choose another --port, or look at the lines above")
