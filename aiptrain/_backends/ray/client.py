"""The Ray Jobs API, through Ray's own `JobSubmissionClient` (HTTP to the cluster's dashboard).

Ray is imported only here (and by the driver, on the cluster), only when a call needs it. Its
failures become aiptrain errors: an address that answers nothing is the user's mistake (exit 2,
with a hint); a job that is not there is NotFound; anything else is operational.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from aiptrain._backends.ray.settings import ADDRESS_HINT
from aiptrain.errors import AlreadyExists, NotFound, OperationalError, UsageError

EXTRA_HINT = "install it with `pip install -e '.[ray]'` in aiptrain's checkout"


def require_ray() -> None:
    """UsageError naming the extra when Ray is not installed (checked without importing it)."""
    if importlib.util.find_spec("ray") is None:
        raise UsageError("the ray backend needs Ray, which is not installed", hint=EXTRA_HINT)


def connect(address: str) -> Any:
    """A JobSubmissionClient for `address`; UsageError (exit 2) if nothing Ray answers there."""
    require_ray()
    import logging

    from ray.job_submission import JobSubmissionClient

    # Ray's client logs each upload (and each closed log tail) at INFO on stderr; aiptrain
    # reports its own progress.
    for name in ("ray", "ray.dashboard.modules.dashboard_sdk", "ray.dashboard.modules.job.sdk",
                 "ray._private.runtime_env.packaging"):
        logging.getLogger(name).setLevel(logging.WARNING)

    try:
        return JobSubmissionClient(address)
    except (ConnectionError, RuntimeError, ValueError, OSError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UsageError(f"cannot reach the Ray Jobs API at {address}: {first}", hint=ADDRESS_HINT) from None


def cluster_nodes(address: str) -> list[Any]:
    """The cluster's live nodes with what each has in all (`node_fit.NodeSize`), from the state
    API of the same dashboard; [] when it does not answer (the fit is then not checked)."""
    from ray.util.state import list_nodes

    from aiptrain._backends.ray.node_fit import NodeSize
    from aiptrain._backends.ray.plan import CONTAINER_RESOURCE

    try:
        nodes = list_nodes(address=address, filters=[("state", "=", "ALIVE")], detail=True, limit=10000,
                           raise_on_missing_output=False, timeout=10)
    except Exception:  # an older or locked-down dashboard: submit as before, the job waits QUEUED
        return []
    sizes = []
    for node in nodes:
        total = node.resources_total or {}
        sizes.append(NodeSize(label=f"{node.node_ip} ({str(node.node_id)[:8]})", cpus=float(total.get("CPU", 0)),
                              memory_bytes=float(total.get("memory", 0)), gpus=float(total.get("GPU", 0)),
                              containers=float(total.get(CONTAINER_RESOURCE, 0))))
    return sizes


def translate(error: Exception, job_id: str) -> OperationalError:
    """A Jobs API failure as the aiptrain error it means."""
    text = str(error)
    if "does not exist" in text or "status code 404" in text:
        return NotFound(f"job {job_id!r} was not found on the Ray cluster",
                        hint="list the cluster's aiptrain jobs with `aiptrain jobs list --backend ray`")
    if "already exists" in text:
        return AlreadyExists(f"a Ray job with submission ID {job_id!r} already exists",
                             hint="choose another JOB id (Ray keeps finished jobs until they are deleted)")
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return OperationalError(f"the Ray Jobs API failed for job {job_id!r}: {first}")


def call(job_id: str, method: Any, *args: Any, **kwargs: Any) -> Any:
    """`method(*args, **kwargs)` with Ray's errors translated."""
    try:
        return method(*args, **kwargs)
    except (RuntimeError, ConnectionError, ValueError, OSError) as error:
        raise translate(error, job_id) from None


class LogTail:
    """Follows one Ray job's log through the Jobs API's websocket tail, in a thread of its own.

    The tail streams the log from its first line and ends once the job has ended and every line
    was sent, so `parser` grows by the new text only: no re-reading of the whole log per poll.
    `done` is set when the stream ends; `failed` says it ended early (the caller reads in full).
    """

    def __init__(self, client: Any, job_id: str, since: Any) -> None:
        import threading

        from aiptrain._backends.ray.joblog import LogParser

        self.client = client
        self.job_id = job_id
        self.parser = LogParser(since)
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.failed = False
        threading.Thread(target=self._run, name=f"ray-log-tail-{job_id}", daemon=True).start()

    def _run(self) -> None:
        import asyncio

        async def consume() -> None:
            async for chunk in self.client.tail_job_logs(self.job_id):
                with self.lock:
                    self.parser.feed(chunk)

        try:
            asyncio.run(consume())
            with self.lock:
                self.parser.finish()
        except Exception:  # any failure: the reader falls back to whole reads
            self.failed = True
        finally:
            self.done.set()

    def entries(self, after: Any = None) -> list[Any]:
        with self.lock:
            return self.parser.after(after)
