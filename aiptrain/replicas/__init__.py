"""What every engine that runs trainer processes shares (the local backend and the Ray driver).

- `replica_set`: one cluster of replicas from start to the primary's exit, with the restart rules;
- `processes`, `ports`, `clock`, `private_env`: process groups and signals, free ports, time,
  secrets kept out of replicas;
- `log_capture`: one log entry per output line, with its severity, to any `LogSink`;
- `preparation`, `install_cache`: the trainer packages installed into a job's site;
- `envs/`: runtime environments, one per runtime version (its Python, TensorFlow, packages);
- `gcs_endpoint/`, `gs_paths`: the replicas' `gs://`, served from the local store;
- `settings`: the engine settings read from the environment;
- `cluster_plan`: what clusters this machine can run, and the replica cap.

May import: `job`, `storage`. Never a backend: no SQLite store here, so a Ray node loads none.
"""
