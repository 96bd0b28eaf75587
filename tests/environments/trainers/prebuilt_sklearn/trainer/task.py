"""A scikit-learn trainer for Vertex AI's pre-built scikit-learn image: pandas and scikit-learn
from the image, the model dumped with joblib and written to --job-dir with google-cloud-storage,
the accuracy reported with cloudml-hypertune."""

import argparse
import json
import pickle
import sys

import hypertune
import joblib
import pandas as pd
import sklearn
from google.cloud import storage
from sklearn.linear_model import LogisticRegression


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    args = parser.parse_args()
    frame = pd.DataFrame({"x": [0.0, 0.1, 0.2, 0.8, 0.9, 1.0], "y": [0, 0, 0, 1, 1, 1]})
    model = LogisticRegression().fit(frame[["x"]], frame["y"])
    accuracy = float(model.score(frame[["x"]], frame["y"]))
    joblib.dump(model, "model.joblib")
    bucket_name, _, prefix = args.job_dir[len("gs://"):].partition("/")
    bucket = storage.Client().bucket(bucket_name)
    bucket.blob(f"{prefix}/model.pkl").upload_from_string(pickle.dumps(model))
    bucket.blob(f"{prefix}/result.json").upload_from_string(json.dumps({
        "accuracy": accuracy, "sklearn": sklearn.__version__, "pandas": pd.__version__,
        "joblib": joblib.__version__, "python": "%d.%d" % sys.version_info[:2]}))
    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="accuracy", metric_value=accuracy, global_step=1)
    print("sklearn %s accuracy=%.2f" % (sklearn.__version__, accuracy))


if __name__ == "__main__":
    main()
