"""`python bench/scripts/proxy_request_cost.py URL REQUESTS`: per-request milliseconds of `jobs.list`
on one kept connection, through `local serve`'s proxy (the environment of `aiptrain local env`:
`https_proxy`, the CA bundle, the credentials file) and given URL directly, alternating batches.
Prints one JSON object: {"proxy": [ms, ...], "direct": [ms, ...]} (each the mean of a batch)."""

from __future__ import annotations

import json
import os
import sys
import time

import requests


def batch(session: requests.Session, url: str, count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        response = session.get(url, timeout=30)
        response.raise_for_status()
    return (time.perf_counter() - started) * 1000 / count


def main() -> None:
    url, requests_per_batch = sys.argv[1].rstrip("/"), int(sys.argv[2])
    with open(os.environ["GOOGLE_APPLICATION_CREDENTIALS"]) as stream:
        credentials = json.load(stream)
    headers = {"Authorization": f"Bearer {credentials['token']}"}
    proxied, direct = requests.Session(), requests.Session()
    proxied.headers.update(headers)
    direct.headers.update(headers)
    direct.trust_env = False  # no proxy for the direct endpoint
    path = "/v1/projects/bench-proxy/jobs?pageSize=1"
    samples: dict[str, list[float]] = {"proxy": [], "direct": []}
    batch(proxied, f"https://ml.googleapis.com{path}", 10)  # connections opened, certificates issued
    batch(direct, f"{url}{path}", 10)
    for _ in range(10):
        samples["proxy"].append(batch(proxied, f"https://ml.googleapis.com{path}", requests_per_batch))
        samples["direct"].append(batch(direct, f"{url}{path}", requests_per_batch))
    print(json.dumps(samples))


if __name__ == "__main__":
    main()
