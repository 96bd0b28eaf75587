"""Where things are, how subprocesses are started, and how everything started is stopped again.

Every subprocess gets an environment of its own: a fresh `AIPTRAIN_HOME`, no inherited
`AIPTRAIN_*`/gcloud settings, no colour. Homes and long-running processes (servers, job
supervisors) are registered with `Cleanup`, which stops them at the end even when a row fails.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = Path(sys.executable)
# The console script next to the interpreter, as a user runs it; `python -m aiptrain` otherwise.
AIPTRAIN_SCRIPT = PYTHON.parent / "aiptrain"
TRAINERS = Path(__file__).resolve().parent / "trainers"
SCRIPTS = Path(__file__).resolve().parent / "scripts"

_STRIPPED_PREFIXES = ("AIPTRAIN_", "CLOUDSDK_", "STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "TF_CONFIG")
_OUTPUT_TAIL = 2000


class BenchError(RuntimeError):
    """A measured command did not do what the row needs (non-zero exit, missing output, ...)."""


def precompile_aiptrain() -> None:
    """Compile aiptrain's modules to bytecode, as `pip install` does for an installed copy.

    The run's own environment may forbid writing bytecode (PYTHONDONTWRITEBYTECODE), and then
    every aiptrain process measured would compile its modules from source, a cost no user pays
    after the first run. Stale or missing files are rewritten; current ones are left alone.
    """
    import compileall

    if not compileall.compile_dir(str(REPO / "aiptrain"), quiet=1):
        raise BenchError("compiling aiptrain's modules to bytecode failed")


def aiptrain_command() -> list[str]:
    if AIPTRAIN_SCRIPT.is_file():
        return [str(AIPTRAIN_SCRIPT)]
    return [str(PYTHON), "-m", "aiptrain"]


def isolated_env(home: Path, extra: Mapping[str, str] | None = None, *,
                 runtime_envs: Path | None = None) -> dict[str, str]:
    """The benchmark's own environment minus aiptrain/gcloud settings, with `home` as AIPTRAIN_HOME.

    Jobs run their trainers with this interpreter (AIPTRAIN_LOCAL_PYTHON), as the anchors do,
    unless `runtime_envs` is given: then in the runtime environments kept in that directory
    (AIPTRAIN_ENVS_DIR, shared by the homes of a row so that each is built once).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED_PREFIXES)}
    env.update({"AIPTRAIN_HOME": str(home), "NO_COLOR": "1", "TF_CPP_MIN_LOG_LEVEL": "2"})
    if runtime_envs is None:
        env["AIPTRAIN_LOCAL_PYTHON"] = str(PYTHON)
    else:
        env["AIPTRAIN_ENVS_DIR"] = str(runtime_envs)
    env.update(extra or {})
    return env


def run_checked(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path | None = None,
                timeout: float = 300, ok_codes: Sequence[int] = (0,)) -> subprocess.CompletedProcess[str]:
    """Run to completion, capturing output; BenchError (with the output's tail) on a bad exit."""
    completed = subprocess.run(list(argv), env=dict(env), cwd=cwd or REPO, capture_output=True, text=True,
                               timeout=timeout, check=False, stdin=subprocess.DEVNULL)
    if completed.returncode not in ok_codes:
        raise BenchError(f"`{' '.join(argv)}` exited {completed.returncode}:\n"
                         f"{(completed.stdout + completed.stderr)[-_OUTPUT_TAIL:]}")
    return completed


def time_command(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path | None = None,
                 timeout: float = 300) -> float:
    """Wall-clock seconds of one run, output discarded (a pipe nobody reads could stall it)."""
    started = time.perf_counter()
    completed = subprocess.run(list(argv), env=dict(env), cwd=cwd or REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, timeout=timeout, check=False, stdin=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    if completed.returncode != 0:
        raise BenchError(f"`{' '.join(argv)}` exited {completed.returncode}:\n"
                         f"{completed.stderr.decode(errors='replace')[-_OUTPUT_TAIL:]}")
    return elapsed


@dataclass
class Cleanup:
    """Everything the run started that could outlive it: servers, and the jobs of each home."""

    scratch: Path
    homes: list[Path] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes] | subprocess.Popen[str]] = field(default_factory=list)

    def new_home(self, name: str) -> Path:
        home = Path(tempfile.mkdtemp(prefix=f"home-{name}-", dir=self.scratch))
        self.homes.append(home)
        return home

    def track(self, process: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
        self.processes.append(process)

    def stop_all(self) -> list[str]:
        """Stop jobs first (their supervisors may talk to a server), then servers. Returns problems."""
        problems: list[str] = []
        for home in self.homes:
            problems.extend(stop_jobs_in(home))
        for process in reversed(self.processes):
            stop_process(process)
        return problems


def stop_process(process: subprocess.Popen[bytes] | subprocess.Popen[str], grace: float = 5.0) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def stop_jobs_in(home: Path, grace: float = 15.0) -> list[str]:
    """Cancel every unfinished job of a home; kill what is left of them after `grace` seconds."""
    if not (home / "jobs.db").exists():
        return []
    from aiptrain._backends.local.job_engine import LocalJobEngine
    from aiptrain._backends.local.reaper import kill_job_processes
    from aiptrain._replicas.processes import is_running

    engine = LocalJobEngine(home)
    try:
        active = engine.store.active_jobs()
        for record in active:
            with contextlib.suppress(Exception):
                engine.cancel(record.project, record.job_id)
        deadline = time.monotonic() + grace
        while engine.store.active_jobs() and time.monotonic() < deadline:
            time.sleep(0.2)
        problems = []
        for record in engine.store.active_jobs():
            problems.append(f"job {record.job_id} in {home} did not stop; killed")
            kill_job_processes(engine.store, record, home)
            pid = record.supervisor_pid
            if pid is not None and is_running(pid, record.supervisor_start_ticks):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        return problems
    finally:
        engine.store.close()


@contextlib.contextmanager
def scratch_space(keep: bool = False) -> Iterator[Path]:
    """A temporary directory for the whole run (kept with --keep-scratch for post-mortems)."""
    path = Path(tempfile.mkdtemp(prefix="aiptrain-bench-"))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


def interpreter_floor(env: Mapping[str, str], runs: int = 5) -> float:
    """Median wall time of `python -c pass`: what any fresh Python process costs on this machine now."""
    samples = sorted(time_command([str(PYTHON), "-c", "pass"], env=env) for _ in range(runs))
    return samples[len(samples) // 2]


_SERVING = re.compile(r"on (http://127\.0\.0\.1:\d+/)")


def start_local_serve(cleanup: Cleanup, env: Mapping[str, str], log: Path, *extra: str) -> str:
    """`aiptrain local serve --port 0 EXTRA...` in the background (stopped by `cleanup`); its URL."""
    with open(log, "wb") as sink:
        process = subprocess.Popen([*aiptrain_command(), "local", "serve", "--port", "0", *extra], env=dict(env),
                                   stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    cleanup.track(process)
    deadline = time.monotonic() + 60
    while True:
        match = _SERVING.search(log.read_text(errors="replace"))
        if match:
            return match.group(1)
        if process.poll() is not None or time.monotonic() > deadline:
            raise BenchError("aiptrain local serve did not start:\n" + log.read_text(errors="replace")[-2000:])
        time.sleep(0.1)
