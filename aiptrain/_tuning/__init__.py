"""Hyperparameter tuning, the parts that need no processes: what is searched and how.

| module | job |
|---|---|
| `space.py` | the parameters of a spec, their scales, grid enumeration, how values become arguments |
| `plan.py` | a HyperparameterSpec with every default resolved (goal, tag, budgets) |
| `search.py` | the ask/tell `Search` protocol and `make_search` (algorithm -> search) |
| `grid.py` | GRID_SEARCH: every combination in a fixed order |
| `model_based.py` | RANDOM_SEARCH and the default (Bayesian) algorithm, on Optuna's samplers |
| `metrics.py` | reading what cloudml-hypertune writes |
| `early_stopping.py` | the median stopping rule |
| `trials.py` | trials as `trainingOutput` reports them, best first |

The local engine runs the trials (`aiptrain._tuning.tuning_run`); the Vertex translation and the
emulator use `space` and `trials` to present HyperparameterTuningJobs as ml v1 jobs. Nothing
here imports Optuna until a model-based search is created.

May import: `errors`, `paths`, `cache_eviction`, `loopback`, `job`, `replicas` (the replica sets, and the
summary reader's view of the system's CA bundle) and `environments` (a trial's Python). Never a
backend: the local engine and the Ray driver each run the trials through a `TuningHost`.
"""
