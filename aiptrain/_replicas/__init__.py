"""What every engine that runs trainer processes shares (the local backend and the Ray driver).

- `replica_set`: one cluster of replicas from start to the primary's exit, with the restart rules;
- `command`: what one replica runs, a trainer module's process or an image's container, as one typed
  value from the job's context to the launcher;
- `processes`, `ports`, `clock`, `private_env`: process groups and signals, free ports, time,
  secrets kept out of replicas;
- `log_capture`: one log entry per output line, with its severity, to any `LogSink`;
- `gs_paths`: how a replica's `gs://` paths map onto the local store;
- `settings`: the engine settings read from the environment;
- `cluster_plan`: what clusters this machine can run, and the replica cap;
- `machine_share`, `this_machine`: each replica's cores, threads and GPUs, and what the machine has;
- `system_trust`: a replica's view of the system's CA bundle with the installation's CA added, for
  TensorFlow before 2.4 (standard library only: `_die_with_parent.py`, the script between a
  supervisor and each replica, loads it by path from beside it);
- `containers/`: replicas that run as containers, the only folder that runs a container engine.

The runtime environments and the trainer's install live in `aiptrain/_environments/`, the replicas'
Cloud Storage endpoint in `aiptrain/_gcs_endpoint/`; both build on this folder, not the reverse.

May import: `errors`, `paths`, `cache_eviction`, `loopback`, `job`, `storage`. Never a backend: no SQLite
store here, so a Ray node loads none.
"""
