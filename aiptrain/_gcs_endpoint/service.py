"""The replicas' view of gs://: one storage endpoint per job, and the environment that leads to it.

`ReplicaStorage` starts the endpoint (`api.StorageServer` over the local store, in a thread of
the process that runs the job) and tells what each replica's environment needs:

- `STORAGE_EMULATOR_HOST`: google-cloud-storage and gcsfs (pandas' `read_csv("gs://...")`) talk
  to the endpoint directly;
- `HTTPS_PROXY`/`https_proxy` with `CURL_CA_BUNDLE`: TensorFlow's GCS filesystem, which only knows
  `https://www.googleapis.com` and `https://storage.googleapis.com`, reaches the endpoint through
  it as a proxy that terminates TLS for those two names with the installation's certificate
  (other hosts are refused, so nothing leaves the machine); `GOOGLE_AUTH_TOKEN_FOR_TESTING` keeps
  TensorFlow from looking for credentials;
- `NO_PROXY`/`no_proxy`/`no_grpc_proxy` with the loopback names, so the cluster's own gRPC
  traffic (TF_CONFIG addresses are `localhost:PORT`) and the endpoint itself are never proxied;
- `CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE` and `CLOUDSDK_AUTH_DISABLE_CREDENTIALS`: `gcloud
  storage` run by a trainer uses the endpoint too;
- `CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE`: `gsutil` (the Cloud SDK's, which many trainers call for
  `gsutil cp`) goes through the proxy like TensorFlow and must trust the installation's CA;
- `GCS_READ_CACHE_BLOCK_SIZE_MB`: the size of TensorFlow's reads (see `_READ_BLOCK_MB`);
- `AIPTRAIN_SYSTEM_CA_BUNDLE`: the replica's launcher shows it the system's CA bundle with the
  installation's CA added (`system_trust`), for TensorFlow releases that ignore `CURL_CA_BUNDLE`.

Trainers then get their `gs://` arguments and `--job-dir` unchanged, as on the service.

A submitted job also gets its VM's metadata server (`metadata`, `job_metadata_server`), started
first: its tokens are the ones the storage endpoint accepts, and TensorFlow's bearer token
(`GOOGLE_AUTH_TOKEN_FOR_TESTING`) is one of them, good for the job's life. The storage endpoint is
then also the replicas' `http_proxy`, for clients that know the metadata server only by its host
name (gsutil's boto plugin, which also takes `http_proxy` for HTTPS). Its replicas then see no
credentials of the user who submitted (GOOGLE_APPLICATION_CREDENTIALS is dropped, CLOUDSDK_CONFIG is
an empty directory of the job's), as the VM had none: `google.auth.default()` finds the metadata
server. `host_endpoints` lists both servers, with the variables that lead a replica to each, for a
launcher that must relay them (containers).
"""

from __future__ import annotations

import contextlib
import functools
import os
import ssl
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from aiptrain._gcs_endpoint.api import StorageServer
from aiptrain._gcs_endpoint.certificates import ServerIdentity, extended_system_bundle, storage_identity
from aiptrain._gcs_endpoint.metadata import MetadataServer, VmIdentity
from aiptrain._gcs_endpoint.objects import Buckets, DirectoryBuckets
from aiptrain._gcs_endpoint.upstream import EmulatorBuckets
from aiptrain._paths import HomeLayout
from aiptrain._replicas import system_trust
from aiptrain._replicas.containers.endpoints import HostEndpoint
from aiptrain._replicas.private_env import without_secrets
from aiptrain._replicas.processes import TOKEN_VARIABLE
from aiptrain._replicas.system_trust import TRUST_VARIABLE, system_bundles

# What TensorFlow sends as its bearer token instead of looking for credentials, where no metadata
# server runs (`local train`): the endpoint then takes any token.
_TEST_TOKEN = "aiptrain-local-storage"  # noqa: S105 - not a secret: checked by no one
_LOOPBACK = ("localhost", "127.0.0.1", "::1")
_JOB_LIFETIME_SECONDS = 10 * 365 * 24 * 3600
# TensorFlow's GCS filesystem reads each open file through a buffer of this many MB, 64 unless
# told: zeroed on every open (50 ms of a 1 kB file's read went there) and filled by one request.
# 16 MB keeps requests few and the buffer in use; a value the replica inherits is kept.
_READ_BLOCK_VARIABLE = "GCS_READ_CACHE_BLOCK_SIZE_MB"
_READ_BLOCK_MB = "16"


# Set by `aiptrain local serve` when its clients stage into a GCS emulator (its STORAGE_EMULATOR_HOST):
# the jobs it creates then read and write that emulator instead of the local store.
UPSTREAM_VARIABLE = "AIPTRAIN_LOCAL_STORAGE_EMULATOR"


def store_buckets(home: Path, storage_root: Path, upstream: str | None) -> Buckets:
    """The buckets served: the GCS emulator at `upstream` when there is one, else the local store."""
    return (EmulatorBuckets(upstream, HomeLayout(home).tmp / "storage-uploads") if upstream
            else DirectoryBuckets(storage_root))


class ReplicaStorage:
    """A running storage endpoint over `storage_root` (or the GCS emulator `upstream`); `close()` stops it.
    With the job's `metadata` server, a request's bearer token must be one of its tokens, and the
    endpoint is the replicas' `http_proxy` that leads clients knowing only the VM's metadata host there."""

    def __init__(self, home: Path, storage_root: Path, upstream: str | None = None, *,
                 extend_system_trust: bool = False, metadata: MetadataServer | None = None) -> None:
        identity = storage_identity(home)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(identity.certificate_path, identity.key_path)
        context.set_alpn_protocols(["http/1.1"])
        # The client's cipher order, not ours: TensorFlow's BoringSSL puts AES-128-GCM first on
        # CPUs with AES instructions, cheaper on both ends than the AES-256 this side prefers.
        context.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
        # No session tickets: TensorFlow opens a new connection for every request and never
        # resumes one, so each ticket would be encrypted, sent and read for nothing.
        context.num_tickets = 0
        self.ca_path = identity.ca_path
        self.upstream = upstream
        # The system's CA bundle, extended with the installation's CA, for the replicas whose
        # TensorFlow trusts only that file (`system_trust`); or why that cannot be done here. Only
        # jobs whose runtime needs it pay for the namespaces (and lose setuid inside them).
        self.system_bundle, self.system_trust_problem = (
            _system_trust(identity) if extend_system_trust else (None, None))
        self.server = StorageServer(store_buckets(home, storage_root, upstream), context, metadata)
        self.proxies_metadata = metadata is not None
        # TensorFlow's bearer token: one of the metadata server's, for the job's whole life.
        self.client_token = metadata.tokens.issue(_JOB_LIFETIME_SECONDS) if metadata is not None else _TEST_TOKEN
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="replica-storage", daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    def environment(self, inherited: Mapping[str, str]) -> dict[str, str]:
        """The variables to set in every replica (on top of `inherited`, the rest of its environment)."""
        endpoint = self.endpoint
        tuning = {} if _READ_BLOCK_VARIABLE in inherited else {_READ_BLOCK_VARIABLE: _READ_BLOCK_MB}
        trust = {} if self.system_bundle is None else {TRUST_VARIABLE: str(self.system_bundle)}
        metadata_names = {"http_proxy": endpoint, "HTTP_PROXY": endpoint} if self.proxies_metadata else {}
        return tuning | trust | metadata_names | loopback_exempt(inherited) | {
            # google-cloud-storage and gcsfs talk to a GCS emulator directly; TensorFlow goes through us.
            "STORAGE_EMULATOR_HOST": self.upstream or endpoint,
            "HTTPS_PROXY": endpoint,
            "https_proxy": endpoint,
            "CURL_CA_BUNDLE": str(self.ca_path),
            "GOOGLE_AUTH_TOKEN_FOR_TESTING": self.client_token,
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE": f"{endpoint}/storage/v1/",
            "CLOUDSDK_AUTH_DISABLE_CREDENTIALS": "true",
            "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE": str(self.ca_path),
        }

    def host_endpoint(self) -> HostEndpoint:
        """The endpoint as container replicas reach it (through the job's relays, at the same address)."""
        host, port = self.server.server_address[:2]
        env = self.environment({})
        env.pop(TRUST_VARIABLE, None)  # a process replica's mount namespace; a container has its own files
        return HostEndpoint("storage", str(host), int(port), env, files=(self.ca_path,), trusted=(self.ca_path,))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ReplicaStorage:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def loopback_exempt(inherited: Mapping[str, str]) -> dict[str, str]:
    """NO_PROXY and its kin with the loopback names (and what `inherited` exempted): the cluster's own
    gRPC traffic (TF_CONFIG addresses are `localhost:PORT`) and the job's servers are never proxied."""
    exempt = list(_LOOPBACK)
    for variable in ("NO_PROXY", "no_proxy"):
        exempt += [host.strip() for host in inherited.get(variable, "").split(",") if host.strip()]
    no_proxy = ",".join(dict.fromkeys(exempt))
    return {"NO_PROXY": no_proxy, "no_proxy": no_proxy, "no_grpc_proxy": no_proxy}


def system_trust_problem(home: Path) -> str | None:
    """Why the replicas cannot be shown the system's CA bundle with the installation's CA added
    (what TensorFlow before 2.4 needs to reach the endpoint); None when they can."""
    return _system_trust(storage_identity(home))[1]


@functools.cache
def _system_trust(identity: ServerIdentity) -> tuple[Path | None, str | None]:
    """(the extended bundle, None) when a replica can be given it, else (None, why not). Tried
    once per process, in a child that enters the namespaces as a replica's launcher would."""
    bundles = system_bundles()
    if not bundles:
        return None, "this machine has no system CA bundle"
    bundle = extended_system_bundle(identity, Path(bundles[0]))
    try:
        probe = subprocess.run([sys.executable, "-I", "-S", system_trust.__file__, "--probe", str(bundle)],
                               capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, str(error)
    if probe.returncode != 0:
        return None, probe.stderr.strip() or f"the check exited with {probe.returncode}"
    return bundle, None


@contextlib.contextmanager
def replica_storage(
    home: Path, storage_root: Path, mode: str, say: Callable[[str], None], *, extend_system_trust: bool = False,
    metadata: MetadataServer | None = None,
) -> Iterator[ReplicaStorage | None]:
    """The job's endpoint while the block runs (None when `mode`, AIPTRAIN_LOCAL_GCS, is `rewrite`);
    `extend_system_trust` for a runtime whose TensorFlow ignores CURL_CA_BUNDLE (`system_trust`);
    `metadata`: the job's metadata server, whose tokens are the only bearer tokens it accepts."""
    if mode != "endpoint":
        yield None
        return
    upstream = os.environ.get(UPSTREAM_VARIABLE) or None
    with ReplicaStorage(home, storage_root, upstream, extend_system_trust=extend_system_trust,
                        metadata=metadata) as storage:
        where = f"the storage emulator {upstream}" if upstream else f"the local store {storage_root}"
        say(f"gs:// is served to the replicas from {where} (storage endpoint {storage.endpoint}).")
        yield storage


@contextlib.contextmanager
def job_metadata_server(identity: VmIdentity, home: Path, say: Callable[[str], None], *,
                        enabled: bool = True) -> Iterator[JobMetadata | None]:
    """The job's metadata server while the block runs, with the empty gcloud configuration its
    replicas get (removed after); None when not `enabled` (AIPTRAIN_LOCAL_METADATA=off)."""
    if not enabled:
        yield None
        return
    scratch = HomeLayout(home).tmp
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gcloud-config-", dir=scratch) as config, \
            MetadataServer(identity) as server:
        say(f"The VM's metadata server answers the replicas at {server.address}: project {identity.project_id} "
            f"({identity.project_number}), zone {identity.zone}, service account {identity.service_account}.")
        yield JobMetadata(server, Path(config))


@dataclass(frozen=True)
class JobMetadata:
    """A job's running metadata server, and the gcloud configuration directory of its replicas."""

    server: MetadataServer
    gcloud_config: Path

    def environment(self, inherited: Mapping[str, str]) -> dict[str, str]:
        """The variables to set in every replica process of this machine."""
        return loopback_exempt(inherited) | self.server.environment() | {"CLOUDSDK_CONFIG": str(self.gcloud_config)}


# Credentials of the user who submitted: the VM had none, and google.auth.default() must find its server.
_USER_CREDENTIALS = ("GOOGLE_APPLICATION_CREDENTIALS",)


_TF2_BEHAVIOR = "TF2_BEHAVIOR"


def replica_base_environment(inherited: Mapping[str, str], storage: ReplicaStorage | None,
                             metadata: JobMetadata | None = None) -> dict[str, str]:
    """What every replica starts from (TF_CONFIG and the rest come on top): the inherited variables
    without aiptrain's secrets and run token (each replica gets a token of its own), plus the
    storage endpoint's variables when one serves gs://, and the metadata server's when there is one."""
    env = without_secrets(inherited)
    env.pop(TOKEN_VARIABLE, None)
    # Set by `import tensorflow` (2.x) in the process that submitted the job (a notebook using the
    # Python API): the service's VMs never had it, and it turns a runtime 1.x trainer's TensorFlow
    # to 2.x behaviour (and a 2.1 trainer's tf.keras.__version__ to 2.3.0-tf).
    env.pop(_TF2_BEHAVIOR, None)
    if metadata is not None:
        for name in _USER_CREDENTIALS:
            env.pop(name, None)
        env.update(metadata.environment(env))
    if storage is not None:
        env.update(storage.environment(env))
    return env


def host_endpoints(storage: ReplicaStorage | None, metadata: JobMetadata | None) -> list[HostEndpoint]:
    """The job's servers on this machine, for a launcher that relays them to its replicas (containers
    reach each at the same 127.0.0.1 address, so the variables are a process replica's)."""
    found = []
    if metadata is not None:
        host, port = metadata.server.server_address[:2]
        found.append(HostEndpoint("metadata", str(host), int(port), metadata.server.environment()))
    if storage is not None:
        found.append(storage.host_endpoint())
    return found
