"""The Python API: what `import aiptrain` offers a notebook, an Airflow task or a script.

`Client` (and the functions of the same names in `aiptrain`) submit, get, list, cancel, wait for
and read the logs of jobs on any backend; the command line is a thin layer over it. Errors are the
`AiptrainError` family (aiptrain.errors).

May import: `errors`, `paths`, `cache_eviction`, `loopback`, `job`, `packaging`, `storage`, `environments`, `submit`,
`backends`. Imported by cli/ and by `aiptrain` itself (lazily).
"""
