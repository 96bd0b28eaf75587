"""`aiptrain local env`: the environment that sends Google's clients to a running `local serve`.

`local serve` writes a record of itself beside its token (`write_record`: its port, its proxy's
port and credentials, the CA bundle, the credentials file, the project), private to its user, and
removes it when it stops. `environment` turns a record into the variables each client reads:

- `HTTPS_PROXY`/`https_proxy` (requests, httplib2, urllib3) and `grpc_proxy` (gRPC): the proxy,
  with its credentials in the URL; `NO_PROXY`/`no_proxy`/`no_grpc_proxy`: loopback, never proxied;
- the system's CA bundle plus the proxy's CA, in every variable a client takes one from:
  `REQUESTS_CA_BUNDLE`, `SSL_CERT_FILE` (Python's ssl, httpx), `HTTPLIB2_CA_CERTS`,
  `CURL_CA_BUNDLE`, `GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`;
- `GOOGLE_APPLICATION_CREDENTIALS` (the `authorized_user` file carrying the server's token) and
  `GOOGLE_CLOUD_PROJECT`;
- gcloud's own: `CLOUDSDK_PROXY_*` (gcloud ignores `https_proxy` when these are set, and reads
  no credentials from a proxy URL), `CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE`,
  `CLOUDSDK_AUTH_ACCESS_TOKEN_FILE` (the token file: no login), `CLOUDSDK_CORE_PROJECT`, and
  usage reporting and update checks off (they would go to Google's other hosts).
"""

from __future__ import annotations

import json
import shlex
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

from aiptrain._emulator.tokens import write_private_file
from aiptrain._paths import HomeLayout, serve_token_path
from aiptrain.errors import UsageError

_LOOPBACK = "localhost,127.0.0.1,::1"
_RECORD_SUFFIX = ".serve.json"


@dataclass(frozen=True)
class ServerRecord:
    port: int
    url: str
    project: str
    proxy_port: int
    proxy_username: str
    proxy_password: str
    ca_bundle: str
    credentials: str
    token_file: str | None  # None: the server asks for no token (--no-auth)


def record_path(port: int, home: Path | None) -> Path:
    token_file = serve_token_path(port, home)
    return token_file.with_name(f"{token_file.name}{_RECORD_SUFFIX}")


def write_record(record: ServerRecord, home: Path | None) -> Path:
    path = record_path(record.port, home)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_private_file(path, json.dumps(asdict(record), indent=2) + "\n", what="the server's record",
                       hint="check that AIPTRAIN_HOME is writable, or pass --no-proxy")
    return path


def remove_record(record: ServerRecord, home: Path | None) -> None:
    """Remove the record if it is still this server's (another may have taken the port since)."""
    path = record_path(record.port, home)
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("proxy_password") == record.proxy_password:
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def find_record(port: int | None, home: Path | None) -> ServerRecord:
    """The record of the server on `port`, or of the one started last; a UsageError when none runs."""
    folder = HomeLayout.of(home).emulator_tokens
    if port is not None:
        candidates = [record_path(port, home)]
    else:
        found = folder.glob(f"*{_RECORD_SUFFIX}") if folder.is_dir() else iter(())
        candidates = sorted(found, key=_modified, reverse=True)
    for path in candidates:
        record = _read(path)
        if record is not None and _listening(record.port) and _listening(record.proxy_port):
            return record
    where = f"on port {port}" if port is not None else "on this machine"
    raise UsageError(f"no `aiptrain local serve` with its proxy is running {where}",
                     hint="start one with `aiptrain local serve` (without --no-proxy), then run "
                     "`eval \"$(aiptrain local env)\"`" + ("" if port is None else "; or drop --port"))


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _read(path: Path) -> ServerRecord | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return ServerRecord(**data)
    except (OSError, ValueError, TypeError):
        return None


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def environment(record: ServerRecord) -> dict[str, str]:
    """Name -> value of every variable in this module's docstring."""
    proxy = f"http://{record.proxy_username}:{record.proxy_password}@127.0.0.1:{record.proxy_port}"
    bundle = record.ca_bundle
    gcloud_auth = ({"CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": record.token_file} if record.token_file
                   else {"CLOUDSDK_AUTH_DISABLE_CREDENTIALS": "true"})
    return {
        "HTTPS_PROXY": proxy, "https_proxy": proxy, "grpc_proxy": proxy,
        "NO_PROXY": _LOOPBACK, "no_proxy": _LOOPBACK, "no_grpc_proxy": _LOOPBACK,
        "REQUESTS_CA_BUNDLE": bundle, "SSL_CERT_FILE": bundle, "HTTPLIB2_CA_CERTS": bundle,
        "CURL_CA_BUNDLE": bundle, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": bundle,
        "GOOGLE_APPLICATION_CREDENTIALS": record.credentials,
        "GOOGLE_CLOUD_PROJECT": record.project,
        "CLOUDSDK_CORE_PROJECT": record.project,
        "CLOUDSDK_PROXY_TYPE": "http", "CLOUDSDK_PROXY_ADDRESS": "127.0.0.1",
        "CLOUDSDK_PROXY_PORT": str(record.proxy_port),
        "CLOUDSDK_PROXY_USERNAME": record.proxy_username, "CLOUDSDK_PROXY_PASSWORD": record.proxy_password,
        "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE": bundle,
        **gcloud_auth,
        "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "true",
        "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "true",
    }


def render_shell(variables: dict[str, str]) -> str:
    """`export NAME=VALUE` lines for a POSIX shell (`eval "$(aiptrain local env)"`)."""
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in variables.items())
