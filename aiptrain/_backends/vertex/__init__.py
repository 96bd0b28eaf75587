"""The `vertex` backend: an ml v1 Job as a Vertex AI CustomJob, and back.

`translate` turns the Job into a CustomJob (worker pools, executor images) and back; `study` does
the same for a HyperparameterTuningJob and its trials. Both are pure dictionaries in and out, and
the emulator's Vertex side serves with them. `backend.VertexBackend` makes the REST calls through
the REST client of `backends.mlv1`.

May import: `errors`, `paths`, `cache_eviction`, `loopback`, `job`, `tuning` (its pure parts), the `backends`
protocol, `backends.mlv1` (its REST client and log reads).
"""
