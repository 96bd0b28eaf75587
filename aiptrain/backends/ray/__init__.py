"""The `ray` backend: the same job on a Ray cluster; Ray schedules, aiptrain maps.

| module | job |
|---|---|
| `backend.py` | `RayBackend`, what the registry hands out |
| `settings.py` | the cluster address and the bundle scale, from flags and the environment |
| `plan.py` | pure: what Ray cannot run, the placement-group bundles, the Ray job document |
| `joblog.py` | pure: the driver's log line format, parsed back into log entries and job states |
| `client.py` | the Ray Jobs API (HTTP) for submit, describe, list, stop and logs |
| `driver.py` | the entrypoint that runs inside the Ray job: placement group, replicas, restarts |
| `replica_host.py` | the Ray actor that runs one replica process on its node, and its proxy |
| `tuning_host.py` | the tuning study's host on the driver: trials as replica sets of actors |

May import: `job`, `replicas`, `tuning`. Only `client.py`, `driver.py`, `replica_host.py` and
`tuning_host.py` import `ray`, and only when called; never the local backend.
"""
