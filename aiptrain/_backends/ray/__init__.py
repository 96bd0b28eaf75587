"""The `ray` backend: the same job on a Ray cluster; Ray schedules, aiptrain maps.

| module | job |
|---|---|
| `backend.py` | `RayBackend`, what the registry hands out |
| `settings.py` | the cluster address and the bundle scale, from flags and the environment |
| `plan.py` | pure: what Ray cannot run, the placement-group bundles, the Ray job document |
| `runtime_spec.py` | pure: the job's runtime catalog entry, as it travels to the nodes and is read there |
| `node_fit.py` | pure: whether each replica fits some node of the cluster, and the refusal if not |
| `joblog.py` | pure: the driver's log line format, parsed back into log entries and job states |
| `client.py` | the Ray Jobs API (HTTP) for submit, describe, list, stop and logs |
| `driver.py` | the entrypoint that runs inside the Ray job: placement group, replicas, restarts |
| `replica_host.py` | the Ray actor that runs one replica process on its node, and its proxy |
| `node_preparation.py` | in the actor: the runtime's environment (the local builder) and the packages on its node |
| `preparation_log.py` | pure: PREPARING's lines (which node builds, who waits) and its failures, naming nodes |
| `tuning_host.py` | the tuning study's host on the driver: trials as replica sets of actors |

May import: `errors`, `paths`, `cache_eviction`, `loopback`, `job`, `storage`, `replicas`, `environments`,
`tuning`, the `backends` protocol. Only `client.py`, `driver.py`, `replica_host.py` and
`tuning_host.py` import `ray`, and only when called; never the local backend.
"""
