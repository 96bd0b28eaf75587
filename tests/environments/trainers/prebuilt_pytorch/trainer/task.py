"""A PyTorch trainer of the pre-built images' era: a small regression trained with torch on the
CPU, its model saved to --job-dir through google-cloud-storage (the client the image had), and
what it ran on written beside it."""

import argparse
import io
import json
import os
import sys

import torch
import tqdm
from google.cloud import storage


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--epochs", type=int, default=200)
    args = parser.parse_args()
    torch.manual_seed(0)
    features = torch.randn(64, 3)
    labels = features @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.25
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in tqdm.trange(args.epochs, file=sys.stdout, disable=True):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(features), labels)
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    bucket_name, _, prefix = args.job_dir[len("gs://"):].partition("/")
    bucket = storage.Client().bucket(bucket_name)
    weights = io.BytesIO()
    torch.save(model.state_dict(), weights)
    bucket.blob(f"{prefix}/model.pt").upload_from_string(weights.getvalue())
    bucket.blob(f"{prefix}/result.json").upload_from_string(json.dumps({
        "torch": torch.__version__, "python": "%d.%d" % sys.version_info[:2], "first_loss": losses[0],
        "last_loss": losses[-1], "tqdm": tqdm.__version__,
        "rendezvous": {name: os.environ.get(name) for name in ("WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT")}}))
    print("torch %s loss %.4f -> %.4f" % (torch.__version__, losses[0], losses[-1]))


if __name__ == "__main__":
    main()
