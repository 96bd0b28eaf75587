"""The local engine: runs ml v1 training jobs as real process clusters on this machine.

`engine.LocalEngine` is the API (submit/get/list/cancel/logs) the local backend and the emulator
use. Jobs live in a SQLite store (`store`); each job gets a detached supervisor process
(`supervisor`) that takes a slot, installs the trainer package (`preparation`), and runs the
replica set (`replica_set`) with the service's TF_CONFIG (`tf_config`) while capturing every
output line (`log_capture`). `local_train` is the foreground `local train` runner.
"""
