"""Which of Google's host names `local serve` answers through its proxy, and what answers each.

Clients that take no endpoint setting name Google's hosts themselves; the proxy (`proxy`) answers
these names with a certificate for exactly that name and hands the connection on:

- `API`: the emulator's own routes (ml v1, Vertex AI REST and gRPC, Cloud Logging, the Cloud
  Resource Manager and token answers of `proxied_hosts`), through its proxied port;
- `STORAGE`: the Cloud Storage JSON API over the local store (or the GCS emulator).

Any other `*.googleapis.com` name is refused (501) rather than tunnelled to Google: a pipeline
under test must never reach the real service by accident. Other hosts are tunnelled unchanged.
"""

from __future__ import annotations

import re
from enum import Enum


class Destination(Enum):
    API = "api"
    STORAGE = "storage"


# A region as Google spells it in a regional host name: us-central1, europe-west4, me-central2.
_REGION = r"[a-z]+-[a-z]+[0-9]{1,2}"
_SERVED: tuple[tuple[re.Pattern[str], Destination], ...] = (
    (re.compile(rf"(?:{_REGION}-)?ml\.googleapis\.com"), Destination.API),
    (re.compile(rf"(?:{_REGION}-)?aiplatform\.googleapis\.com"), Destination.API),
    (re.compile(r"logging\.googleapis\.com"), Destination.API),
    (re.compile(r"oauth2\.googleapis\.com"), Destination.API),
    (re.compile(r"cloudresourcemanager\.googleapis\.com"), Destination.API),
    (re.compile(r"storage\.googleapis\.com"), Destination.STORAGE),
    (re.compile(r"www\.googleapis\.com"), Destination.STORAGE),
)
# Said to a client refused a Google host, so it knows what it can reach.
SERVED_DESCRIPTION = (
    "ml.googleapis.com and REGION-ml.googleapis.com (ml v1), aiplatform.googleapis.com and "
    "REGION-aiplatform.googleapis.com (Vertex AI, REST and gRPC), logging.googleapis.com, "
    "storage.googleapis.com and www.googleapis.com/storage (Cloud Storage), oauth2.googleapis.com/token, "
    "cloudresourcemanager.googleapis.com (projects.get)"
)
OAUTH2_HOST = "oauth2.googleapis.com"
RESOURCE_MANAGER_HOST = "cloudresourcemanager.googleapis.com"


def destination(host: str) -> Destination | None:
    """Where requests to `host` (a bare name, no port) go; None: not served."""
    name = host.lower().rstrip(".")
    for pattern, where in _SERVED:
        if pattern.fullmatch(name):
            return where
    return None


def is_google_host(host: str) -> bool:
    """A name of Google's APIs: never tunnelled to Google from here."""
    name = host.lower().rstrip(".")
    return name == "googleapis.com" or name.endswith(".googleapis.com")


def carries_grpc(host: str) -> bool:
    """The hosts whose gRPC services the emulator serves (aiplatform v1's job and pipeline services)."""
    name = host.lower().rstrip(".")
    return name == "aiplatform.googleapis.com" or name.endswith("-aiplatform.googleapis.com")


def api_of(host: str) -> str:
    """The API a served host stands for: `ml`, `aiplatform`, `logging`, `oauth2` or `cloudresourcemanager`."""
    first = host.lower().split(".", 1)[0]
    return first.rsplit("-", 1)[-1] if first.endswith(("-ml", "-aiplatform")) else first
