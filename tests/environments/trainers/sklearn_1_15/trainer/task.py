"""A scikit-learn trainer of the runtime 1.15 era: pandas, sklearn.externals.joblib (gone since
scikit-learn 0.23), the model written to gs:// with gsutil-free tf.gfile, and the accuracy
reported to the tuning service with cloudml-hypertune."""

import argparse
import json
import os

import hypertune
import pandas as pd
import sklearn
import tabulate
import tensorflow as tf
from sklearn.externals import joblib
from sklearn.linear_model import LogisticRegression


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--C", type=float, default=1.0)
    args = parser.parse_args()
    frame = pd.DataFrame({"x": [0.0, 0.1, 0.2, 0.8, 0.9, 1.0], "y": [0, 0, 0, 1, 1, 1]})
    model = LogisticRegression(C=args.C, solver="liblinear").fit(frame[["x"]], frame["y"])
    accuracy = float(model.score(frame[["x"]], frame["y"]))
    joblib.dump(model, "model.joblib")
    tf.gfile.MakeDirs(args.job_dir)
    tf.gfile.Copy("model.joblib", os.path.join(args.job_dir, "model.joblib"), overwrite=True)
    with tf.gfile.GFile(os.path.join(args.job_dir, "result.json"), "w") as out:
        json.dump({"accuracy": accuracy, "C": args.C, "pandas": pd.__version__, "sklearn": sklearn.__version__,
                   "pandas_file": pd.__file__, "sklearn_file": sklearn.__file__,
                   "tabulate": tabulate.__version__}, out)
    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="accuracy", metric_value=accuracy, global_step=1)
    print("sklearn %s pandas %s C=%s accuracy=%.2f" % (sklearn.__version__, pd.__version__, args.C, accuracy))


if __name__ == "__main__":
    main()
