"""Entry point: ``python -m trainer.task --train-files ... --eval-files ... [--job-dir DIR]``.

Flags are parsed before TensorFlow is imported, so a typo fails in a fraction of a second.
The engine (gcloud, aiptrain, Vertex AI) appends ``--job-dir`` after the user's arguments.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import logging
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence

from trainer.cluster import ClusterConfigError, ClusterRole, role_from_environment


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def _hidden_units(text: str) -> list[int]:
    try:
        units = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected comma-separated layer sizes such as 64,32, got {text}") from error
    if not units or any(size <= 0 for size in units):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive layer sizes, got {text}")
    return units


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.task",
        description="Train an 8x8 digits classifier with the tf.distribute strategy TF_CONFIG calls for.",
        allow_abbrev=False,
    )
    data = parser.add_argument_group("data")
    data.add_argument("--train-files", nargs="+", required=True, help="training CSV files or glob patterns")
    data.add_argument("--eval-files", nargs="+", required=True, help="evaluation CSV files or glob patterns")
    data.add_argument(
        "--job-dir",
        default=None,
        help="output directory for checkpoints, summaries and exports (a temporary directory if absent)",
    )

    hyper = parser.add_argument_group("hyperparameters")
    hyper.add_argument("--learning-rate", type=float, default=0.003, help="Adam learning rate")
    hyper.add_argument("--batch-size", type=_positive_int, default=64, help="examples per replica per step")
    hyper.add_argument("--train-steps", type=_positive_int, default=1000, help="global steps to train for")
    hyper.add_argument("--hidden-units", type=_hidden_units, default=[64, 32], help="layer sizes, e.g. 64,32")

    run = parser.add_argument_group("checkpoints and evaluation")
    run.add_argument("--checkpoint-steps", type=_positive_int, default=100, help="save a checkpoint every N steps")
    run.add_argument("--checkpoint-secs", type=_non_negative_float, default=None, help="also save every N seconds")
    run.add_argument("--keep-checkpoint-max", type=_positive_int, default=5, help="checkpoints to keep")
    run.add_argument("--log-steps", type=_positive_int, default=50, help="log and write summaries every N steps")
    run.add_argument("--eval-steps", type=_positive_int, default=None, help="eval batches (default: all eval data)")
    run.add_argument("--throttle-secs", type=_non_negative_float, default=30.0, help="minimum time between evals")
    run.add_argument(
        "--start-delay-secs", type=_non_negative_float, default=0.0, help="evaluator task: wait before first eval"
    )
    run.add_argument(
        "--eval-timeout-secs",
        type=_non_negative_float,
        default=1800.0,
        help="evaluator task: stop after this long without a new checkpoint",
    )
    run.add_argument("--metric-tag", default="accuracy", help="metric reported for hyperparameter tuning")
    run.add_argument("--seed", type=int, default=42, help="random seed for weights and input shuffling")
    run.add_argument("--shuffle-buffer", type=_positive_int, default=1000, help="records in the shuffle buffer")
    return parser


def model_dir_for(job_dir: str | None, role: ClusterRole, environ: Mapping[str, str] | None = None) -> str:
    """Where this run writes: ``--job-dir``, else Vertex AI's base output directory, else a temp dir.

    A hyperparameter tuning trial (TF_CONFIG ``task.trial``) writes to its own directory, so
    concurrent trials never share checkpoints: where ``AIP_MODEL_DIR`` is set (Vertex AI and
    aiptrain point it at ``<trial directory>/model``) that is its parent; otherwise (ml v1 gave
    every trial the same ``--job-dir``) the trial number is appended to ``--job-dir``. Without
    ``--job-dir``, the parent of ``AIP_MODEL_DIR`` is the output directory. Replicas of one
    cluster without either agree on a temp dir named after their cluster, so the evaluator and
    the workers find the chief's checkpoints.
    """
    env = os.environ if environ is None else environ
    aip_model_dir = env.get("AIP_MODEL_DIR", "").rstrip("/")
    if job_dir:
        if not role.trial:
            return job_dir
        return os.path.dirname(aip_model_dir) if aip_model_dir else os.path.join(job_dir, role.trial)
    if aip_model_dir:
        return os.path.dirname(aip_model_dir)
    if role.cluster:
        digest = hashlib.sha256(json.dumps(dict(role.cluster), sort_keys=True).encode()).hexdigest()[:16]
        shared = os.path.join(tempfile.gettempdir(), f"trainer-job-{digest}")
        return os.path.join(shared, role.trial) if role.trial else shared
    return tempfile.mkdtemp(prefix="trainer-job-")


def unmatched_local_patterns(patterns: Sequence[str]) -> list[str]:
    """Local file patterns that match nothing; remote ones (gs://...) are left to TensorFlow."""
    return [pattern for pattern in patterns if "://" not in pattern and not glob.glob(pattern)]


def _configure_logging(role: ClusterRole) -> None:
    logger = logging.getLogger("trainer")
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s [{role.label}] %(message)s"))
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    # TensorFlow may attach its own handler to the root logger; keep our lines single.
    logger.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    for flag, patterns in (("--train-files", args.train_files), ("--eval-files", args.eval_files)):
        unmatched = unmatched_local_patterns(patterns)
        if unmatched:
            parser.error(f"{flag}: no file matches {', '.join(unmatched)}")
    try:
        role = role_from_environment()
    except ClusterConfigError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 2
    _configure_logging(role)
    logger = logging.getLogger("trainer")
    logger.info("trainer package %s, arguments: %s", os.path.dirname(os.path.abspath(__file__)), " ".join(argv))
    model_dir = model_dir_for(args.job_dir, role)
    if args.job_dir is None:
        logger.info("no --job-dir given: writing to %s", model_dir)
    elif model_dir != args.job_dir:
        logger.info("hyperparameter tuning trial %s: writing to %s", role.trial, model_dir)

    # TensorFlow is imported only now, after the flags are known to be good.
    from trainer.estimator import Estimator, EvalSpec, ModelSpec, RunConfig, TrainSpec
    from trainer.inputs import NUM_FEATURES, EvalInput, TrainInput
    from trainer.model import build_classifier, build_optimizer
    from trainer.train_and_evaluate import train_and_evaluate

    config = RunConfig(
        model_dir=model_dir,
        save_checkpoints_steps=args.checkpoint_steps,
        save_checkpoints_secs=args.checkpoint_secs,
        log_step_count_steps=args.log_steps,
        save_summary_steps=args.log_steps,
        keep_checkpoint_max=args.keep_checkpoint_max,
        tf_random_seed=args.seed,
        role=role,
    )
    model = ModelSpec(
        build_model=lambda: build_classifier(args.hidden_units),
        build_optimizer=lambda: build_optimizer(args.learning_rate),
        num_features=NUM_FEATURES,
    )
    train_spec = TrainSpec(
        input_fn=TrainInput(tuple(args.train_files), job_seed=args.seed, shuffle_buffer=args.shuffle_buffer),
        max_steps=args.train_steps,
        batch_size=args.batch_size,
    )
    eval_spec = EvalSpec(
        input_fn=EvalInput(tuple(args.eval_files), batch_size=args.batch_size),
        steps=args.eval_steps,
        throttle_secs=args.throttle_secs,
        start_delay_secs=args.start_delay_secs,
        metric_tag=args.metric_tag,
        evaluator_idle_timeout_secs=args.eval_timeout_secs,
    )
    return train_and_evaluate(Estimator(model=model, config=config), train_spec, eval_spec)


if __name__ == "__main__":
    sys.exit(main())
