"""The `mlv1` backend: any endpoint that speaks the legacy ml v1 REST API (`backend.MlV1Backend`),
`aiptrain local serve` first of all, and the REST plumbing the Vertex backend shares with it.

- `backend`: the ml v1 backend (jobs create, get, list, cancel, patch);
- `client`: endpoints, proxies and the `googleapiclient` discovery clients; nothing else under
  `aiptrain/` imports googleapiclient (ruff's banned-api, lifted by this folder's ruff.toml);
- `logs`: Cloud Logging v2 reads, shared with the Vertex backend;
- `local_token`: the bearer token of a `local serve` on this machine.

May import: `errors`, `paths`, `cache_eviction`, `loopback`, `job`, `backends` (the protocol).
"""
