"""Like the scikit-learn trainers of AI Platform's day: `gsutil cp` the data down, train, `gsutil cp`
the model up to --job-dir, then list and read it back with gsutil; and the same with `gcloud storage`."""

import argparse
import json
import os
import subprocess
import sys


def gsutil(*args: str) -> str:
    return subprocess.run(["gsutil", *args], check=True, stdout=subprocess.PIPE, stderr=sys.stdout,
                          text=True).stdout


def gcloud_storage(*args: str) -> str:
    return subprocess.run(["gcloud", "storage", *args], check=True, stdout=subprocess.PIPE, stderr=sys.stdout,
                          text=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--data", required=True)
    args = parser.parse_args()

    gsutil("cp", args.data, "train.csv")
    with open("train.csv") as data:
        rows = [line.split(",") for line in data.read().splitlines()[1:]]
    model = {"rows": len(rows), "mean_y": sum(float(row[-1]) for row in rows) / len(rows)}
    os.makedirs("export", exist_ok=True)
    with open("export/model.json", "w") as out:
        json.dump(model, out)
    with open("export/notes.txt", "w") as out:
        out.write("trained with gsutil\n")
    gsutil("-m", "cp", "-r", "export", args.job_dir + "/")
    listed = gsutil("ls", args.job_dir + "/export/").split()
    print("listed " + json.dumps(sorted(listed)), flush=True)
    print("read back " + gsutil("cat", args.job_dir + "/export/model.json"), flush=True)
    gcloud_storage("cp", "export/notes.txt", args.job_dir + "/gcloud/notes.txt")
    gcloud_storage("cp", args.job_dir + "/gcloud/notes.txt", "notes-back.txt")
    with open("notes-back.txt") as back:
        print("gcloud storage round trip " + back.read().strip(), flush=True)


if __name__ == "__main__":
    main()
