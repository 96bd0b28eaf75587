"""A trainer written for AI Platform, the way its samples were: every path is a gs:// URI it builds.

    python -m gsworld.task --bucket BUCKET --job-dir gs://BUCKET/...

It reads `gs://BUCKET/world/data/train-*.csv` with tf.data, trains a little, writes checkpoints,
summaries and a SavedModel under --job-dir, lists them with google-cloud-storage, reads a CSV
with pandas, and tries a Google host that is not storage. What it saw goes to
`<--job-dir>/report.json`, written with tf.io.gfile.
"""

from __future__ import annotations

import argparse
import json
import urllib.request

import tensorflow as tf


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--job-dir", required=True)
    args = parser.parse_args()
    if not args.job_dir.startswith("gs://"):
        raise SystemExit(f"expected a gs:// --job-dir, got {args.job_dir}")
    data = f"gs://{args.bucket}/world/data"
    files = sorted(tf.io.gfile.glob(data + "/train-*.csv"))
    dataset = tf.data.experimental.make_csv_dataset(
        files, batch_size=8, label_name="y", num_epochs=1, shuffle=False)
    rows = sum(int(labels.shape[0]) for _features, labels in dataset)
    features = dataset.map(lambda columns, label: (tf.stack([columns["a"], columns["b"]], axis=1), label))

    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    checkpoint = tf.train.Checkpoint(model=model)
    manager = tf.train.CheckpointManager(checkpoint, args.job_dir + "/checkpoints", max_to_keep=2)
    writer = tf.summary.create_file_writer(args.job_dir + "/logs")
    for epoch in range(3):
        loss = model.fit(features, epochs=1, verbose=0).history["loss"][-1]
        manager.save(checkpoint_number=epoch)
        with writer.as_default():
            tf.summary.scalar("loss", loss, step=epoch)
    writer.close()
    tf.saved_model.save(model, args.job_dir + "/model")
    tf.io.gfile.makedirs(args.job_dir + "/notes")
    with tf.io.gfile.GFile(args.job_dir + "/notes/hello.txt", "w") as note:
        note.write("written with tf.io.gfile")

    from google.cloud import storage

    prefix = args.job_dir.removeprefix(f"gs://{args.bucket}/")
    listed = sorted(blob.name.removeprefix(prefix + "/")
                    for blob in storage.Client().list_blobs(args.bucket, prefix=prefix + "/"))

    import pandas

    frame = pandas.read_csv(data + "/train-0.csv")
    try:
        urllib.request.urlopen("https://oauth2.googleapis.com/token", timeout=30)
        elsewhere = "reached"
    except OSError as error:
        elsewhere = str(error)
    report = {
        "files": files,
        "rows": rows,
        "latest_checkpoint": tf.train.latest_checkpoint(args.job_dir + "/checkpoints"),
        "notes": tf.io.gfile.listdir(args.job_dir + "/notes"),
        "listed": listed,
        "pandas_shape": list(frame.shape),
        "elsewhere": elsewhere,
        "model_loads": tf.saved_model.load(args.job_dir + "/model") is not None,
    }
    with tf.io.gfile.GFile(args.job_dir + "/report.json", "w") as out:
        out.write(json.dumps(report))
    print("report written", flush=True)


if __name__ == "__main__":
    main()
