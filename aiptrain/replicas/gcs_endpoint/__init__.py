"""gs:// for the replicas of local jobs: the local store served as Cloud Storage, for every client.

- `objects.py`: the local store's tree as buckets and objects (plain files, atomic writes);
- `api.py`: the Cloud Storage JSON API over it, which is also the replicas' HTTPS proxy for
  Google's storage hosts (what TensorFlow's GCS filesystem needs);
- `certificates.py`: the installation's CA and the certificate for those hosts;
- `service.py`: `ReplicaStorage`, one endpoint per job, and the replicas' environment.
"""
