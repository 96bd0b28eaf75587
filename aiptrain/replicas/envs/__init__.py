"""Runtime environments: the Python and packages a job's `runtimeVersion` promised.

- `resolution`: which environment a runtime version runs in on this machine, and what was
  substituted (pure; dry-run and `jobs describe` use it too);
- `store`: the environments under `$AIPTRAIN_HOME/envs/`, built with uv, atomically, once;
- `trainer_install`: the trainer package and its `install_requires` on top of an environment;
- `uv`: finding and running the uv binary that the `uv` wheel ships.
"""
