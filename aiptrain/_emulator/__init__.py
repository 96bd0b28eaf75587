"""`aiptrain local serve`: ml v1, aiplatform v1 (REST and gRPC), logging v2 and a console over the
local engine.

`serve` starts it; `app` routes; `guard` checks every request before any route (Host, Origin,
token, content type); `mlv1_api`, `vertex_api`, `vertex_jobs`, `tuning_api`, `pipelines_api`
(trainingPipelines, run as their backing CustomJob) and `logging_api` answer each API; `grpc_api`
serves the same handlers as aiplatform v1 gRPC services on a second, TLS port; `console/` is the
browser's view of the jobs; `services` is what every route shares (the local engine, the
storage); `admission` runs the CLI's checks on jobs created over REST; `schema`, `query`, `errors`
speak Google's wire formats. `proxy` is the HTTPS proxy that answers Google's host names
(`google_hosts`) with certificates of its own CA (`proxy_ca`) and hands the streams to the server,
where `proxied_hosts` answers what only those names carry (token refresh, projects.get);
`client_env` is the environment `aiptrain local env` prints for it. `ray_runner` runs the
server's jobs on a Ray cluster (`local serve --backend ray`), their records kept in the local store.

May import: `errors`, `paths`, `cache_eviction`, `loopback`, `job`, `replicas`, `environments`, `gcs_endpoint`,
`tuning`, `storage`, `submit`, the `backends` registry, the local backend (`backends.local`), the
Ray backend (`backends.ray`) and the Vertex translation (`backends.vertex`). Never `cli`, never
googleapiclient (it serves the clients, it is not one).
"""
