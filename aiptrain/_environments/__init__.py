"""Runtime environments and the trainer's install: the Python and packages a job's `runtimeVersion`
promised, with the trainer package on top.

- `resolution`: which environment a runtime version runs in on this machine, and what was
  substituted (pure; dry-run and `jobs describe` use it too);
- `interpreters`: the CPython interpreters this machine has (uv-managed, PATH, pyenv's root, a setting);
- `store`: the environments under `$AIPTRAIN_HOME/envs/`, built with uv as of the runtime's day,
  atomically, once;
- `virtualenv_build`: Python 2.7 environments, made by virtualenv (a tool under the home's `tools/`)
  and installed by the pip of their day from the index of the runtime's day;
- `for_job`: the one path every engine takes from a job to its environment's `bin/python`, and the
  day the job's packages resolve as of (`job.era`);
- `trainer_install`: uv's command for the trainer package and its `install_requires`, and what its
  failures mean; `overlay`: the runtime's packages shown to uv as installed (pip's rules);
  `pip_fallback`, `dated_index`: the runtime's pip for what uv refuses, from an index of the day;
- `trainer_pins`, `release_dates`: the trainer's exact pins, which move the runtime's day to the
  newest one's, dated by the index and remembered in the install cache;
- `preparation`, `install_cache`: the job's packages fetched and installed once per packages,
  environment and day; each job's site hard-links the cached files;
- `pip_config`: the machine's pip settings (index, proxy, certificates) carried to uv, and the
  settings of the runtime's pip (`pip_environment`);
- `uv`: finding and running the uv binary that the `uv` wheel ships.

May import: `errors`, `paths`, `cache_eviction`, `loopback`, `job`, `storage`, `replicas` (processes, settings,
log capture). Never a backend, `submit` or `cli`: a Ray node builds environments without SQLite.
"""
