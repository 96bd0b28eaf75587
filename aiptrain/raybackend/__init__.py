"""The Ray backend's parts: each module has one job.

| module | job |
|---|---|
| `settings.py` | the cluster address and the bundle scale, from flags and the environment |
| `plan.py` | pure: what Ray cannot run, the placement-group bundles, the Ray job document |
| `joblog.py` | pure: the driver's log line format, parsed back into log entries and job states |
| `client.py` | the Ray Jobs API (HTTP) for submit, describe, list, stop and logs |
| `driver.py` | the entrypoint that runs inside the Ray job: placement group, replicas, restarts |
| `replica_host.py` | the Ray actor that runs one replica process on its node, and its proxy |

Only `client.py`, `driver.py` and `replica_host.py` import `ray`, and only when called.
"""
