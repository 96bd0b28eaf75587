"""The submit pipeline: from command-line flags and a `--config` file to a created job.

- `flags`: the table of `jobs submit training` flags and the TrainingInput fields they fill;
- `flag_values`: the flags' values, from the command line or the Python API, as `SubmitOptions`;
- `config_file`: reading a `--config` YAML/JSON file (with `nesting`, its depth limit);
- `staging`: content-addressed uploads of the trainer packages;
- `submission`: the merge of flags and config, validation, packaging, staging, then the
  backend's `create_job` or the dry-run rendering;
- `follow`: streaming a job's logs and polling its state until it ends.

May import: `errors`, `paths`, `cache_eviction`, `loopback`, `job`, `packaging`, `storage`, the `backends`
protocol and registry, and of one backend's modules only the Vertex translation
(`backends.vertex.study`, pure), which every dry-run shows. Never imports click.
"""
