"""REST clients: the ml v1 API (`mlv1.MlV1Backend`, any endpoint that speaks it, such as
`aiptrain local serve`) and Cloud Logging v2 reads shared with the Vertex backend (`logs`).

`client` resolves endpoints, honours proxies and calls `googleapiclient`; nothing else under
`aiptrain/` imports googleapiclient except the emulator's tests of it.

May import: `job`.
"""
