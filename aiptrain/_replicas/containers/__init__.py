"""Replicas that run as containers: the one place that drives a container engine (Docker or Podman).

A replica whose spec names an image runs as a container, given what the service gave it; the
replica set's rules (restarts, the primary's end, cancel) apply unchanged through
`ContainerLauncher`, a `ReplicaLauncher`. Backends ask for container replicas; they never call the
engine themselves.

- `settings`: which engine, and whether images may be pulled (AIPTRAIN_CONTAINER_*);
- `engine`: finding the engine and calling its command line;
- `command`: pure: what each replica's container runs (Kubernetes' command/args rules) and the
  engine's command line for it, as dry-run shows it;
- `images`: what is known of an image here (its id, ENTRYPOINT, environment), and the refusals
  at submit (no engine, an image that is not here, a built-in algorithm);
- `endpoints`, `relay`, `relay_image`: the job's host-side servers (its storage endpoint, its
  metadata server) reached from inside each replica's network namespace through a Unix socket
  that only the job's containers have;
- `launcher`: the network, the containers and their labels, for one replica set;
- `cleanup`: removing what a job created, also after its supervisor died, and what an engine
  that had gone away could not remove, once it answers again.

The only folder of aiptrain that runs Docker's or Podman's programs (tests/test_layers.py holds it).

May import: `errors`, `paths`, `cache_eviction`, `loopback`, `job`, `storage`, and the rest of `replicas`. Never a
backend.
"""
