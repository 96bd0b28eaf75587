"""Where progress goes: log lines, TensorBoard summaries and hyperparameter tuning metrics."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import tensorflow as tf

logger = logging.getLogger("trainer")


@dataclass
class MetricWindow:
    """Sums of per-example loss and correct predictions over the steps since the last flush."""

    loss_sum: float = 0.0
    correct: float = 0.0
    examples: float = 0.0
    steps: int = 0
    started: float = field(default_factory=time.monotonic)

    def add(self, loss_sum: float, correct: float, examples: float, steps: int = 1) -> None:
        self.loss_sum += loss_sum
        self.correct += correct
        self.examples += examples
        self.steps += steps

    def flush(self) -> dict[str, float]:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        examples = max(self.examples, 1.0)
        values = {
            "loss": self.loss_sum / examples,
            "accuracy": self.correct / examples,
            "steps_per_sec": self.steps / elapsed,
        }
        self.loss_sum = self.correct = self.examples = 0.0
        self.steps = 0
        self.started = time.monotonic()
        return values


def _scalar_metadata() -> tf.compat.v1.SummaryMetadata:
    # What TensorBoard's scalar plugin expects. Written with core TF's ``tf.summary.write`` so
    # summaries work even where the tensorboard package (needed by tf.summary.scalar) is absent.
    return tf.compat.v1.SummaryMetadata(
        plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars"),
        data_class=_DATA_CLASS_SCALAR,
    )


_DATA_CLASS_SCALAR = 1  # tensorboard.compat.proto.summary_pb2.DATA_CLASS_SCALAR


class Summaries:
    """TensorBoard scalars in one run directory; a no-op on replicas that must not write."""

    def __init__(self, log_dir: str | None) -> None:
        self._writer = tf.summary.create_file_writer(log_dir) if log_dir else None

    def scalars(self, values: dict[str, float], step: int) -> None:
        if self._writer is None:
            return
        metadata = _scalar_metadata()
        with self._writer.as_default(step=step):
            for name, value in values.items():
                tf.summary.write(name, tf.constant(value, tf.float32), metadata=metadata)
        self._writer.flush()


class HyperparameterReporter:
    """Reports evaluation metrics through cloudml-hypertune (file named by CLOUD_ML_HP_METRIC_FILE)."""

    def __init__(self, metric_tag: str) -> None:
        self.metric_tag = metric_tag
        self._client: object | None = None
        self._unavailable = False

    def report(self, metrics: dict[str, float], step: int) -> None:
        if self._unavailable:
            return
        if self.metric_tag not in metrics:
            logger.warning("metric %r is not among %s; nothing reported", self.metric_tag, sorted(metrics))
            return
        if self._client is None:
            try:
                import hypertune
            except ImportError:
                logger.warning("cloudml-hypertune is not installed; metrics are not reported")
                self._unavailable = True
                return
            # One client for the whole run: it rewrites the file with every value reported so far.
            self._client = hypertune.HyperTune()
        self._client.report_hyperparameter_tuning_metric(  # type: ignore[attr-defined]
            hyperparameter_metric_tag=self.metric_tag,
            metric_value=metrics[self.metric_tag],
            global_step=step,
        )


def format_metrics(values: dict[str, float]) -> str:
    return " ".join(f"{name}={value:.4f}" for name, value in values.items())
