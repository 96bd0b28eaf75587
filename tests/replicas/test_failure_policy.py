"""Which exits of a replica are retried, and how the errorMessage names the replica that failed.

What a job does with them (a failure ends it at once, a kill restarts replicas) is in
tests/backends/local/test_failure_policy.py."""

from __future__ import annotations

from aiptrain._replicas.replica_set import failure_message, is_retryable, service_replica_name


def test_retryable_means_killed() -> None:
    assert is_retryable(-9) and is_retryable(137) and is_retryable(-15)
    assert not is_retryable(1) and not is_retryable(2) and not is_retryable(127)


def test_replicas_are_named_as_the_service_named_them() -> None:
    assert [service_replica_name(n) for n in ("master-replica-0", "worker-replica-12", "ps-replica-2",
                                              "evaluator-replica-0", "service")] == [
        "master 0", "worker 12", "ps 2", "evaluator 0", "service"]
    message = failure_message("worker-replica-3", 1, ["Traceback (most recent call last):", '  File "x"',
                                                      "ValueError: bad", ""])
    assert message.splitlines()[0] == "The replica worker 3 exited with a non-zero status of 1. ValueError: bad"
    assert message.splitlines()[1:] == ["Traceback (most recent call last):", '  File "x"', "ValueError: bad"]
    assert failure_message("ps-replica-0", 2, ["usage: bad flag"]) == (
        "The replica ps 0 exited with a non-zero status of 2. usage: bad flag")


def test_a_vertex_jobs_failure_is_worded_as_vertex_worded_it() -> None:
    message = failure_message("master-replica-0", 3, ["ValueError: bad"], vertex=True)
    assert message == ("The replica workerpool0-0 exited with a non-zero status of 3. Termination reason: Error. "
                       "ValueError: bad")
    # A killed replica: the status its container reported, 128 + the signal.
    assert failure_message("worker-replica-1", -9, [], restarts=2, vertex=True) == (
        "The replica workerpool1-1 exited with a non-zero status of 137. Termination reason: Error. "
        "It had been restarted 2 times.")
