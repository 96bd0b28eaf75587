"""A runtime 1.15 trainer of 2020: trains a small Keras model on its pinned TensorFlow, writes its
report to gs:// with the image's google-cloud-storage and the VM's default credentials, lists what
it wrote (TensorFlow's gfile wrote a file there too), and says which packages it saw."""

import argparse
import json

import google.auth
import google.auth.transport.requests
import google.protobuf
import numpy as np
import pandas
import scipy
import sklearn
import tabulate
import tensorflow as tf
import tensorflow_hub as hub
import xgboost
from google.cloud import storage


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    args = parser.parse_args()
    x = np.random.RandomState(0).rand(64, 3).astype(np.float32)
    y = x.sum(axis=1, keepdims=True)
    model = tf.keras.Sequential([tf.keras.layers.Dense(4, input_shape=(3,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(x, y, epochs=3, verbose=0)
    with tf.io.gfile.GFile(args.job_dir + "/tf-gfile.txt", "w") as out:
        out.write("written by TensorFlow's GCS client")

    credentials, project = google.auth.default()
    credentials.refresh(google.auth.transport.requests.Request())  # its email comes with its token
    client = storage.Client()
    bucket, _, prefix = args.job_dir[len("gs://"):].partition("/")
    report = {
        "tensorflow": tf.__version__, "protobuf": google.protobuf.__version__, "hub": hub.__version__,
        "tabulate": tabulate.__version__, "numpy": np.__version__, "scipy": scipy.__version__,
        "pandas": pandas.__version__, "sklearn": sklearn.__version__, "xgboost": xgboost.__version__,
        "storage": storage.__version__, "credentials": type(credentials).__module__, "project": project,
        "email": credentials.service_account_email, "losses": [float(v) for v in history.history["loss"]],
    }
    client.bucket(bucket).blob(prefix + "/report.json").upload_from_string(json.dumps(report))
    listed = sorted(blob.name for blob in client.list_blobs(bucket, prefix=prefix + "/"))
    client.bucket(bucket).blob(prefix + "/listed.json").upload_from_string(json.dumps(listed))
    print("era 1.15 trainer trained on TensorFlow %s, protobuf %s" % (tf.__version__, google.protobuf.__version__))


if __name__ == "__main__":
    main()
