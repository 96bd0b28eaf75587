"""XGBoost as trainers pinned it in 2019 (0.81), on a tiny regression problem."""

import argparse
import json
import os

import numpy as np
import tensorflow as tf
import xgboost as xgb


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    args = parser.parse_args()
    rng = np.random.RandomState(1)
    x = rng.rand(64, 3)
    y = x[:, 0] * 2.0 + x[:, 1]
    booster = xgb.train({"max_depth": 3, "eta": 0.3, "objective": "reg:linear", "silent": 1},
                        xgb.DMatrix(x, label=y), 10)
    rmse = float(np.sqrt(np.mean((booster.predict(xgb.DMatrix(x)) - y) ** 2)))
    booster.save_model("model.bst")
    tf.gfile.MakeDirs(args.job_dir)
    tf.gfile.Copy("model.bst", os.path.join(args.job_dir, "model.bst"), overwrite=True)
    with tf.gfile.GFile(os.path.join(args.job_dir, "result.json"), "w") as out:
        json.dump({"xgboost": xgb.__version__, "rmse": rmse}, out)
    print("xgboost %s rmse=%.4f" % (xgb.__version__, rmse))


if __name__ == "__main__":
    main()
