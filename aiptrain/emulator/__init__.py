"""`aiptrain local serve`: ml v1, Vertex AI customJobs and logging v2 over the local engine.

`serve` starts it; `app` routes; `guard` checks every request before any route (Host, Origin,
token, content type); `mlv1_api`, `vertex_api`, `vertex_jobs`, `tuning_api` and `logging_api`
answer each API; `services` is what every route shares (the local engine, the storage);
`admission` runs the CLI's checks on jobs created over REST; `schema`, `query`, `errors` speak
Google's wire formats. `proxy` is the HTTPS proxy that answers Google's host names (`google_hosts`)
with certificates of its own CA (`proxy_ca`) and hands the streams to the server, where
`proxied_hosts` answers what only those names carry (token refresh, projects.get); `client_env`
is the environment `aiptrain local env` prints for it.

May import: `errors`, `paths`, `job`, `replicas`, `environments`, `gcs_endpoint`, `tuning`,
`storage`, `submit`, the `backends` registry, the local backend and the Vertex translation.
Never `cli`, never googleapiclient (it serves the clients, it is not one).
"""
