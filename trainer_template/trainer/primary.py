"""What only the primary replica does around checkpoints: evaluate, report, export, mark the end."""

from __future__ import annotations

import logging
import time

from trainer.checkpoints import clear_completion_marker, write_completion_marker
from trainer.compat import keras
from trainer.estimator import Estimator, EvalSpec
from trainer.evaluation import EvalRunner
from trainer.export import FinalExporter
from trainer.reporting import HyperparameterReporter, Summaries, format_metrics

logger = logging.getLogger("trainer")


class PrimaryDuties:
    def __init__(self, estimator: Estimator, eval_spec: EvalSpec) -> None:
        self._config = estimator.config
        self._num_features = estimator.model.num_features
        self._throttle_secs = eval_spec.throttle_secs
        self._exporters = list(eval_spec.exporters) if eval_spec.exporters is not None else [FinalExporter()]
        # Built outside any strategy scope: a plain local model that weights are copied into.
        self._runner = EvalRunner(estimator.model.build_model(), eval_spec)
        self._summaries = Summaries(self._config.eval_log_dir)
        self._reporter = HyperparameterReporter(eval_spec.metric_tag)
        self._last_eval_time: float | None = None
        self._last_eval_step: int | None = None
        self._last_metrics: dict[str, float] = {}

    def begin(self) -> None:
        # A marker left by an earlier, shorter run would make evaluators stop too early.
        clear_completion_marker(self._config.completion_marker)

    def after_checkpoint(self, model: keras.Model, step: int) -> None:
        due = self._last_eval_time is None or time.monotonic() - self._last_eval_time >= self._throttle_secs
        if due:
            self._evaluate(model, step)

    def finish(self, model: keras.Model, step: int) -> dict[str, float]:
        write_completion_marker(self._config.completion_marker, step)
        metrics = self._last_metrics if self._last_eval_step == step else self._evaluate(model, step)
        self._runner.copy_weights_from(model)
        for exporter in self._exporters:
            exporter.export(self._runner.model, self._config.export_dir_base, self._num_features, metrics, True)
        return metrics

    def _evaluate(self, model: keras.Model, step: int) -> dict[str, float]:
        self._runner.copy_weights_from(model)
        metrics = self._runner.evaluate()
        self._last_eval_time = time.monotonic()
        self._last_eval_step = step
        self._last_metrics = metrics
        logger.info("eval at step %d: %s", step, format_metrics(metrics))
        self._summaries.scalars({"loss": metrics["loss"], "accuracy": metrics["accuracy"]}, step)
        self._reporter.report(metrics, step)
        for exporter in self._exporters:
            exporter.export(self._runner.model, self._config.export_dir_base, self._num_features, metrics, False)
        return metrics
