"""Input pipelines: CSV shards of features + label, sharded by worker and shuffled per worker.

Every worker lists the same files in the same job-wide shuffled order, so taking every n-th file
gives disjoint shards. Each worker then shuffles its own files and records with a seed derived
from its task, so two workers never start from the same batch. The pure helpers at the top
(no TensorFlow) describe that plan; the dataset builders below follow it.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

# typing.Callable, not collections.abc.Callable: InputFn below is evaluated at import time, and
# collections.abc generics cannot be subscripted before Python 3.9 (runtime 2.11 runs 3.7).
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import tensorflow as tf

NUM_FEATURES = 64
NUM_CLASSES = 10
FEATURE_COLUMNS = tuple(f"pixel_{i}" for i in range(NUM_FEATURES))
LABEL_COLUMN = "label"
CSV_HEADER = (*FEATURE_COLUMNS, LABEL_COLUMN)


def derive_seed(job_seed: int, task_type: str, task_index: int, start_step: int = 0) -> int:
    """A stable per-task seed; the start step makes a resumed replica draw fresh batches."""
    key = f"{job_seed}/{task_type}/{task_index}/{start_step}".encode()
    return zlib.crc32(key) & 0x7FFFFFFF


def first_batch_fingerprint(features: Any) -> str:
    """A short hash of a batch, logged so runs can show which data each worker started from."""
    digest = hashlib.sha256()
    for part in features:
        digest.update(memoryview(part).tobytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class PipelineContext:
    """Which slice of the data one input pipeline reads.

    Like ``tf.distribute.InputContext``, but the pipeline id and the seed may be tensors: under
    parameter server training the dataset function is traced once on the coordinator and the
    worker index is only known when it runs on a worker.
    """

    num_input_pipelines: int
    input_pipeline_id: Any
    batch_size: int
    seed: Any


def expand_patterns(patterns: Sequence[str]) -> list[str]:
    import tensorflow as tf

    files: list[str] = []
    for pattern in patterns:
        files.extend(tf.io.gfile.glob(pattern))
    if not files:
        raise FileNotFoundError(f"no input files match {list(patterns)}")
    return sorted(set(files))


def _decode_csv_lines(lines: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    import tensorflow as tf

    defaults = [[0.0]] * NUM_FEATURES + [[0]]
    columns = tf.io.decode_csv(lines, record_defaults=defaults)
    features = tf.stack(columns[:NUM_FEATURES], axis=-1)
    labels = tf.cast(columns[NUM_FEATURES], tf.int64)
    return features, labels


def _csv_lines(path: tf.Tensor) -> tf.data.Dataset:
    # A named function rather than a lambda: TensorFlow 2.11's autograph warns (on stderr, which
    # the service logs as ERROR) about every lambda it converts.
    import tensorflow as tf

    return tf.data.TextLineDataset(path).skip(1)  # skip the CSV header


def _records(files: tf.data.Dataset, cycle_length: int) -> tf.data.Dataset:
    import tensorflow as tf

    return files.interleave(
        _csv_lines,
        cycle_length=cycle_length,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )


@dataclass(frozen=True)
class TrainInput:
    """The training ``input_fn``: call it with a ``PipelineContext`` to get batches forever."""

    patterns: tuple[str, ...]
    job_seed: int
    shuffle_buffer: int = 1000

    def files(self) -> list[str]:
        return expand_patterns(self.patterns)

    def file_dataset(self, context: PipelineContext) -> tf.data.Dataset:
        """This pipeline's files for one epoch, in the order it will read them."""
        import tensorflow as tf

        files = self.files()
        # Same seed on every worker: the job-wide order is identical, so shards are disjoint.
        listed = tf.data.Dataset.list_files(list(self.patterns), shuffle=True, seed=self.job_seed)
        if len(files) >= context.num_input_pipelines:
            listed = listed.shard(context.num_input_pipelines, context.input_pipeline_id)
        return listed.shuffle(len(files), seed=context.seed, reshuffle_each_iteration=True)

    def __call__(self, context: PipelineContext) -> tf.data.Dataset:
        import tensorflow as tf

        files = self.files()
        shard_by_file = len(files) >= context.num_input_pipelines
        records = _records(self.file_dataset(context).repeat(), cycle_length=min(4, len(files)))
        if not shard_by_file:
            # Fewer files than workers: every worker reads all files and keeps every n-th line.
            records = records.shard(context.num_input_pipelines, context.input_pipeline_id)
        return (
            records.shuffle(self.shuffle_buffer, seed=context.seed, reshuffle_each_iteration=True)
            .batch(context.batch_size, drop_remainder=True)
            .map(_decode_csv_lines, num_parallel_calls=tf.data.AUTOTUNE)
            .prefetch(tf.data.AUTOTUNE)
        )


@dataclass(frozen=True)
class EvalInput:
    """The evaluation ``input_fn``: one ordered pass over the eval files (or ``steps`` batches)."""

    patterns: tuple[str, ...]
    batch_size: int
    steps: int | None = None

    def __call__(self) -> tf.data.Dataset:
        import tensorflow as tf

        files = tf.data.Dataset.from_tensor_slices(expand_patterns(self.patterns))
        dataset = _records(files, cycle_length=1)
        if self.steps is not None:
            dataset = dataset.repeat()
        dataset = dataset.batch(self.batch_size).map(_decode_csv_lines, num_parallel_calls=tf.data.AUTOTUNE)
        if self.steps is not None:
            dataset = dataset.take(self.steps)
        return dataset.prefetch(tf.data.AUTOTUNE)


InputFn = Callable[[PipelineContext], "tf.data.Dataset"]
