"""Input sharding and shuffling: disjoint files per worker, a different first batch per worker."""

from __future__ import annotations

import csv

import numpy as np


def _context(inputs, count, index, seed, batch_size=16):
    return inputs.PipelineContext(num_input_pipelines=count, input_pipeline_id=index, batch_size=batch_size, seed=seed)


def _file_order(train, context) -> list[str]:
    return [path.decode() for path in train.file_dataset(context).as_numpy_iterator()]


def _first_batch(train, context) -> np.ndarray:
    features, labels = next(iter(train(context)))
    assert features.shape == (context.batch_size, 64) and labels.shape == (context.batch_size,)
    batch: np.ndarray = features.numpy()
    return batch


def test_seeds_depend_on_task_and_start_step(template_module):
    inputs = template_module("inputs")
    seeds = {
        inputs.derive_seed(42, "chief", 0),
        inputs.derive_seed(42, "worker", 0),
        inputs.derive_seed(42, "worker", 1),
        inputs.derive_seed(42, "worker", 1, start_step=100),
        inputs.derive_seed(7, "worker", 1),
    }
    assert len(seeds) == 5
    assert inputs.derive_seed(42, "worker", 1) == inputs.derive_seed(42, "worker", 1)


def test_two_workers_get_disjoint_files_and_different_first_batches(template_module, digits):
    inputs = template_module("inputs")
    train = inputs.TrainInput((digits.train_pattern,), job_seed=42)
    contexts = [_context(inputs, 2, index, inputs.derive_seed(42, "worker", index)) for index in range(2)]

    orders = [_file_order(train, context) for context in contexts]
    assert all(len(order) == 2 for order in orders)
    assert set(orders[0]).isdisjoint(orders[1])
    assert set(orders[0]) | set(orders[1]) == {str(path) for path in digits.train_files}

    first, second = (_first_batch(train, context) for context in contexts)
    assert inputs.first_batch_fingerprint([first]) != inputs.first_batch_fingerprint([second])


def test_shuffling_follows_the_seed(template_module, digits):
    inputs = template_module("inputs")
    train = inputs.TrainInput((digits.train_pattern,), job_seed=42)
    same = [_first_batch(train, _context(inputs, 1, 0, 5)) for _ in range(2)]
    np.testing.assert_array_equal(same[0], same[1])
    other_seed = _first_batch(train, _context(inputs, 1, 0, 6))
    assert not np.array_equal(same[0], other_seed)


def test_tensor_worker_index_matches_python_index(template_module, digits):
    """Parameter server workers only know their index as a tensor; the pipeline must not care."""
    import tensorflow as tf

    inputs = template_module("inputs")
    train = inputs.TrainInput((digits.train_pattern,), job_seed=42)
    seed = inputs.derive_seed(42, "worker", 1)
    as_python = _first_batch(train, _context(inputs, 2, 1, seed))
    as_tensors = _first_batch(train, _context(inputs, 2, tf.constant(1, tf.int64), tf.constant(seed, tf.int64)))
    np.testing.assert_array_equal(as_python, as_tensors)


def test_more_workers_than_files_shard_by_record(template_module, digits):
    inputs = template_module("inputs")
    train = inputs.TrainInput((digits.train_pattern,), job_seed=42)
    batches = [_first_batch(train, _context(inputs, 6, index, inputs.derive_seed(42, "worker", index)))
               for index in range(6)]
    assert len({inputs.first_batch_fingerprint([batch]) for batch in batches}) == 6


def test_eval_input_is_one_ordered_pass(template_module, digits):
    inputs = template_module("inputs")
    expected_rows = 0
    for path in digits.eval_files:
        with path.open() as handle:
            rows = list(csv.reader(handle))
        assert tuple(rows[0]) == inputs.CSV_HEADER
        expected_rows += len(rows) - 1
    evaluation = inputs.EvalInput((digits.eval_pattern,), batch_size=50)
    labels = np.concatenate([labels.numpy() for _, labels in evaluation()])
    assert len(labels) == expected_rows
    assert set(labels) == set(range(10))
    again = np.concatenate([labels.numpy() for _, labels in evaluation()])
    np.testing.assert_array_equal(labels, again)
