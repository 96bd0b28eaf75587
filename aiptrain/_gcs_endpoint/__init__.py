"""gs:// for the replicas of local jobs: the local store served as Cloud Storage, for every client;
and the VM's metadata server, whose tokens the storage endpoint accepts.

- `objects.py`: the local store's tree as buckets and objects (plain files, atomic writes);
- `api.py`: the Cloud Storage JSON API over it, which is also the replicas' HTTPS proxy for
  Google's storage hosts (what TensorFlow's GCS filesystem needs);
- `transfer.py`: object bodies between the store's files and a connection (sendfile, one buffer);
- `peer.py`: whose process is on the other end of a connection (only the endpoint's user is served);
- `upstream.py`: the same operations on a GCS emulator, for jobs created through `local serve`;
- `certificates.py`: the installation's CA, the certificate for those hosts, and the system's CA
  bundle with the CA appended (its CA and certificate signing is reused by `local serve`'s proxy;
  a replica's view of the bundle is `replicas/system_trust.py`);
- `metadata.py`: the metadata server of a job's VM (project, zone, service account, tokens);
- `service.py`: `ReplicaStorage`, one endpoint per job, the metadata server's lifetime, and the
  replicas' environment (`host_endpoints` lists both servers for a launcher that relays them).

May import: `errors`, `paths`, `cache_eviction`, `loopback`, `job`, `storage`, `replicas` (processes, secrets
kept out of replicas, the system's CA bundle as a replica sees it). Never a backend, `submit` or
`cli`.
"""
