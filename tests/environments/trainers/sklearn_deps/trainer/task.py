"""pandas + scikit-learn, with a dependency that only its setup.py names."""

import argparse
import json
import os

import pandas as pd
import sklearn
import tabulate
import tensorflow as tf  # the runtime ships it; gs:// output goes through tf.io.gfile
from sklearn.linear_model import LogisticRegression


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    args = parser.parse_args()
    frame = pd.DataFrame({"x": [0.0, 0.1, 0.2, 0.8, 0.9, 1.0], "y": [0, 0, 0, 1, 1, 1]})
    model = LogisticRegression().fit(frame[["x"]], frame["y"])
    accuracy = float(model.score(frame[["x"]], frame["y"]))
    print(tabulate.tabulate([["accuracy", accuracy]]), flush=True)
    tf.io.gfile.makedirs(args.job_dir)  # a gs:// --job-dir arrives as given, as on the service
    with tf.io.gfile.GFile(os.path.join(args.job_dir, "result.json"), "w") as out:
        json.dump({"accuracy": accuracy, "pandas": pd.__version__, "sklearn": sklearn.__version__,
                   "tabulate_file": tabulate.__file__}, out)


if __name__ == "__main__":
    main()
