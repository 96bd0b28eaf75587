#!/usr/bin/env bash
# `make demo`: train trainer_template as a distributed job (chief + 1 worker, synchronous) on the
# local backend, streaming its logs, then say where the export and the TensorBoard logs are.
# The job runs on the runtime version the template declares (config.yaml: 2.11), in that
# runtime's environment, which the first run builds (uv; reused offline afterwards).
# Usage: scripts/demo.sh [BIN]: BIN holds the `aiptrain` to run (`make demo`: .venv-demo/bin, where
# aiptrain is installed alone, as a user installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$(cd "${1:-.venv-demo/bin}" && pwd)"
export AIPTRAIN_HOME="${AIPTRAIN_HOME:-$HOME/.aiptrain}"
BUCKET=aiptrain-demo
JOB="demo_$(date +%Y%m%d_%H%M%S)"
DATA_DIR="$AIPTRAIN_HOME/storage/$BUCKET/data"
RUNTIME=2.11

echo "Preparing runtime $RUNTIME's environment ..." >&2
RUNTIME_ENV="$("$BIN/aiptrain" local envs build "$RUNTIME")"

if [ ! -f "$DATA_DIR/.complete" ]; then
  echo "Writing the digits data set (it ships with scikit-learn) to gs://$BUCKET/data ..." >&2
  mkdir -p "$DATA_DIR"
  (cd trainer_template && "$RUNTIME_ENV/bin/python" -m trainer.make_data --output-dir "$DATA_DIR" --shards 4)
  touch "$DATA_DIR/.complete"
fi

"$BIN/aiptrain" jobs submit training "$JOB" \
  --package-path trainer_template/trainer --module-name trainer.task \
  --config trainer_template/config.yaml --worker-machine-type n1-standard-4 --worker-count 1 \
  --region us-central1 --runtime-version "$RUNTIME" --python-version 3.7 \
  --job-dir "gs://$BUCKET/jobs/$JOB" \
  --stream-logs \
  -- --train-files "gs://$BUCKET/data/train-*.csv" --eval-files "gs://$BUCKET/data/eval-*.csv" \
     --train-steps 400 --checkpoint-steps 100 --throttle-secs 5

JOB_DIR="$AIPTRAIN_HOME/storage/$BUCKET/jobs/$JOB"
echo
echo "Job $JOB finished. Its outputs (gs://$BUCKET/jobs/$JOB on the local backend):"
echo "  exported model:  $(ls -d "$JOB_DIR"/export/*/ 2>/dev/null | tail -n 1)"
echo "  TensorBoard logs: $JOB_DIR/logs  (view: pip install tensorboard; tensorboard --logdir ...)"
echo "  describe it:     $BIN/aiptrain jobs describe $JOB"
