"""A TensorFlow 1 trainer on runtime 2.1: it runs the TensorFlow it pinned (tf.contrib is there), writes
and lists gs:// with the image's google-cloud-storage and the VM's default credentials, and says
which of the image's packages it saw."""

import argparse
import json

import google.auth
import numpy as np
import pandas
import sklearn
import tensorflow as tf
from google.cloud import storage


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    args = parser.parse_args()
    with tf.Session() as session:
        total = session.run(tf.reduce_sum(tf.constant([40.0, 2.0])))
    credentials, project = google.auth.default()
    client = storage.Client()
    bucket, _, prefix = args.job_dir[len("gs://"):].partition("/")
    report = {"tensorflow": tf.__version__, "contrib": hasattr(tf, "contrib"), "sum": float(total),
              "numpy": np.__version__, "pandas": pandas.__version__, "sklearn": sklearn.__version__,
              "storage": storage.__version__, "credentials": type(credentials).__module__, "project": project}
    client.bucket(bucket).blob(prefix + "/report.json").upload_from_string(json.dumps(report))
    print("listed", json.dumps(sorted(b.name for b in client.list_blobs(bucket, prefix=prefix + "/"))))


if __name__ == "__main__":
    main()
