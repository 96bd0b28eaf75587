"""SavedModel export for serving: ``model_dir/export/<timestamp>`` and, on Vertex AI, ``AIP_MODEL_DIR``."""

from __future__ import annotations

import abc
import logging
import os
import time

import tensorflow as tf

from trainer.compat import keras
from trainer.model import ServingModule

logger = logging.getLogger("trainer")


def export_saved_model(model: keras.Model, export_dir: str, num_features: int) -> str:
    module = ServingModule(model, num_features)
    tf.saved_model.save(
        module,
        export_dir,
        signatures={"serving_default": module.serve.get_concrete_function()},
    )
    logger.info("exported SavedModel to %s", export_dir)
    return export_dir


def timestamped_dir(base: str) -> str:
    """A new ``base/<unix seconds>`` directory name, as Estimator exporters used."""
    stamp = int(time.time())
    while tf.io.gfile.exists(os.path.join(base, str(stamp))):
        stamp += 1
    return os.path.join(base, str(stamp))


class Exporter(abc.ABC):
    """Replaces ``tf.estimator.Exporter``: called by the primary replica after each evaluation.

    An abstract base class, as ``tf.estimator.Exporter`` was (``typing.Protocol`` needs Python
    3.8, and runtime 2.11 runs 3.7): an exporter of your own subclasses it.
    """

    name: str

    @abc.abstractmethod
    def export(
        self, model: keras.Model, export_dir_base: str, num_features: int, metrics: dict[str, float], is_final: bool
    ) -> str | None:
        """Export ``model`` if this exporter wants to now; returns the export directory, or None."""


class FinalExporter(Exporter):
    """Replaces ``tf.estimator.FinalExporter``: one export when training has finished.

    Written to ``export_dir_base/<timestamp>``; when ``AIP_MODEL_DIR`` is set (Vertex AI and the
    local runner set it) the same model is saved there too, where model upload expects it.
    """

    def __init__(self, name: str = "final") -> None:
        self.name = name

    def export(
        self, model: keras.Model, export_dir_base: str, num_features: int, metrics: dict[str, float], is_final: bool
    ) -> str | None:
        if not is_final:
            return None
        path = export_saved_model(model, timestamped_dir(export_dir_base), num_features)
        aip_model_dir = os.environ.get("AIP_MODEL_DIR")
        if aip_model_dir:
            export_saved_model(model, aip_model_dir, num_features)
        return path
