"""The job model: what a training job is, before anything runs it.

- `spec`: the ml v1 `Job` / `TrainingInput` resource (pydantic, REST field names);
- `state`: job states and which of them are final (no pydantic, so polling loops stay light);
- `logs`: log entries and the cursor that walks a job's log;
- `catalog`: scale tiers, machine types, accelerators, regions, runtime versions and Google's
  pre-built training images (YAML data);
- `prebuilt`: which pre-built image's environment a job runs its module in;
- `cluster`: the replica groups a tier or a CUSTOM config asks for;
- `project_id`: project ids as gcloud accepts them;
- `validate`: every problem of a job at once, against the catalog, with `limits` (what could
  only fail later: object names, package archives, argument sizes);
- `tf_config`: TF_CONFIG, CLUSTER_SPEC and the AIP_* variables each replica gets;
- `filters`: gcloud's `--filter` language, parsed once and evaluated on resources (`jobs list` on
  every backend, the emulator's `jobs.list`);
- `listing`: `jobs list` filtering, ordering and limit applied on the client side;
- `projection`: gcloud's `--format` expressions, parsed, and the values their keys select
  (`transforms`: `date()`, `basename()` ...); both parse with `text_cursor`;
- `label_update`: `jobs update`'s label flags applied to a job's labels.

May import: `errors` and this folder only. No network, no processes, no writes: `catalog` reads its
YAML files (or `AIPTRAIN_CATALOG`'s) and `limits` looks at the local archives `--packages` names.
"""
