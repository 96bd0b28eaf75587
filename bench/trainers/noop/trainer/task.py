"""`python -m trainer.task [--import-tensorflow] [--sleep S]`: say which replica this is, then exit 0.

With --import-tensorflow it first imports TensorFlow, the fixed cost every real trainer pays;
with --sleep it stays up (an idle job, for memory readings). Unknown arguments such as the
engine's --job-dir are ignored.
"""

import argparse
import json
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--import-tensorflow", action="store_true")
parser.add_argument("--sleep", type=float, default=0.0)
args, _unknown = parser.parse_known_args()
if args.import_tensorflow:
    import tensorflow  # noqa: F401, TID251 - the point is the import's cost

task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {})
print(f"noop trainer: {task.get('type', 'single')}-{task.get('index', 0)}", flush=True)
time.sleep(args.sleep)
