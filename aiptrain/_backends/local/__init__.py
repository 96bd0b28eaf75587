"""The `local` backend: jobs run on this machine as real process clusters.

`backend.LocalBackend` is what the registry hands out; `engine.LocalJobEngine` its API over the
SQLite job store (`store`, `store_errors`). Each job gets a detached supervisor (`supervisor`,
started by `supervisor_start`, guarded by `launch` and `reaper`, with `subreaper`) that takes a
run slot, prepares the runtime environment and runs the replica set in a `job_context`.
`job_wait` is `jobs wait` without the job model; `local_train` the foreground `local train`;
`layout` where a job's files live; `filters` the store's list filters.

May import: `errors`, `paths`, `cache_eviction`, `loopback`, `job`, `replicas`, `environments`, `gcs_endpoint`,
`tuning`, `storage`, the `backends` protocol. The only folder that imports sqlite3.
"""
