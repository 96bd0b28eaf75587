"""XGBoost on a tiny regression problem, reporting its RMSE to the tuning service."""

import argparse

import hypertune
import numpy as np
import xgboost as xgb


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--max-depth", type=int, default=2)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    x = rng.random((64, 3))
    y = x[:, 0] * 2.0 + x[:, 1]
    data = xgb.DMatrix(x, label=y)
    booster = xgb.train({"max_depth": args.max_depth, "eta": 0.3, "objective": "reg:squarederror"}, data, 10)
    rmse = float(np.sqrt(np.mean((booster.predict(data) - y) ** 2)))
    print(f"xgboost {xgb.__version__} max_depth={args.max_depth} rmse={rmse:.4f}", flush=True)
    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="rmse", metric_value=rmse, global_step=10)


if __name__ == "__main__":
    main()
