"""Writes scikit-learn's bundled 8x8 digits as CSV shards: ``train-*.csv`` and ``eval-*.csv``.

``python -m trainer.make_data --output-dir DIR --shards 4`` needs no network: the digits ship
inside scikit-learn. Each row is 64 pixel values (0-16) followed by the digit label.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from trainer.inputs import CSV_HEADER


@dataclass(frozen=True)
class WrittenData:
    train_pattern: str
    eval_pattern: str
    train_files: list[str]
    eval_files: list[str]
    train_rows: int
    eval_rows: int


def _write_shards(rows: list[list[int]], directory: str, prefix: str, shards: int) -> list[str]:
    paths = []
    for shard in range(shards):
        path = os.path.join(directory, f"{prefix}-{shard:05d}-of-{shards:05d}.csv")
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(CSV_HEADER)
            writer.writerows(rows[shard::shards])
        paths.append(path)
    return paths


def write_digits(
    output_dir: str, shards: int = 4, eval_shards: int = 2, eval_fraction: float = 0.2, seed: int = 0,
    rows_wanted: int | None = None,
) -> WrittenData:
    from sklearn.datasets import load_digits

    digits = load_digits()
    pairs = zip(digits.data, digits.target)
    rows = [[int(value) for value in image] + [int(label)] for image, label in pairs]
    random.Random(seed).shuffle(rows)
    rows = rows[:rows_wanted]  # a sample (the template's sample_data/ is one), or all 1797
    eval_count = int(len(rows) * eval_fraction)
    eval_rows, train_rows = rows[:eval_count], rows[eval_count:]

    os.makedirs(output_dir, exist_ok=True)
    return WrittenData(
        train_pattern=os.path.join(output_dir, "train-*.csv"),
        eval_pattern=os.path.join(output_dir, "eval-*.csv"),
        train_files=_write_shards(train_rows, output_dir, "train", shards),
        eval_files=_write_shards(eval_rows, output_dir, "eval", eval_shards),
        train_rows=len(train_rows),
        eval_rows=len(eval_rows),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.make_data", description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--shards", type=int, default=4, help="training shards")
    parser.add_argument("--eval-shards", type=int, default=2)
    parser.add_argument("--eval-fraction", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", type=int, default=None, help="only this many of the 1797 images")
    args = parser.parse_args(argv)
    if args.shards < 1 or args.eval_shards < 1 or not 0 < args.eval_fraction < 1:
        parser.error("shards must be >= 1 and --eval-fraction between 0 and 1")
    if args.rows is not None and args.rows < args.shards + args.eval_shards:
        parser.error("--rows must leave at least one row per shard")
    written = write_digits(args.output_dir, args.shards, args.eval_shards, args.eval_fraction, args.seed, args.rows)
    print(f"wrote {written.train_rows} training rows in {len(written.train_files)} shards: {written.train_pattern}")
    print(f"wrote {written.eval_rows} eval rows in {len(written.eval_files)} shards: {written.eval_pattern}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
