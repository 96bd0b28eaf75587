"""The certificate authority of `local serve`'s proxy, and the certificate it shows for each host.

The proxy answers Google's host names itself, so it must show a certificate for each name that
the client verifies. They are signed by a CA made once per aiptrain home (`HomeLayout.proxy_ca`,
the key readable by its owner only), which is never installed anywhere: only a process given the
bundle `aiptrain local env` names (the system's CAs plus this one) trusts it. A certificate names
exactly one host, and is issued only for the hosts the proxy serves (`google_hosts`), when a
client first asks for one; hosts that are tunnelled keep their own.

The signing reuses the installation CA's code (`gcs_endpoint.certificates`); that CA stays the
replicas' own, so trusting one never means trusting the other.
"""

from __future__ import annotations

import fcntl
import os
import ssl
import threading
from pathlib import Path

from aiptrain._emulator.google_hosts import destination
from aiptrain._gcs_endpoint.certificates import new_authority, sign_leaf, write_atomically
from aiptrain._paths import HomeLayout
from aiptrain._replicas.system_trust import system_bundles

_COMMON_NAME = "aiptrain local serve proxy CA (this machine, this user only)"


class ProxyAuthority:
    def __init__(self, home: Path) -> None:
        self.folder = HomeLayout(home).proxy_ca
        self.ca_path = self.folder / "ca.pem"
        self.key_path = self.folder / "ca-key.pem"
        self.bundle_path = self.folder / "bundle.pem"
        self._contexts: dict[tuple[str, tuple[str, ...]], ssl.SSLContext] = {}
        self._lock = threading.Lock()

    def ensure(self) -> None:
        """Make the CA on first use (under a lock: two servers starting at once make one)."""
        if self.ca_path.is_file() and self.key_path.is_file():
            return
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.folder.chmod(0o700)
        with open(self.folder / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (self.ca_path.is_file() and self.key_path.is_file()):
                certificate, key = new_authority(_COMMON_NAME)
                write_atomically(self.key_path, key)  # the key first: whoever finds the CA finds its key
                write_atomically(self.ca_path, certificate)

    def write_bundle(self, system_bundle: Path | None = None) -> Path:
        """The system's CA bundle with this CA appended: what clients of the proxy trust. Tunnelled
        hosts (PyPI, through this machine's own proxy if it has one) still verify as before."""
        self.ensure()
        source = system_bundle or _system_bundle()
        system = source.read_bytes().rstrip(b"\n") + b"\n" if source is not None else b""
        content = system + self.ca_path.read_bytes()
        try:
            if self.bundle_path.read_bytes() == content:
                return self.bundle_path
        except FileNotFoundError:
            pass
        write_atomically(self.bundle_path, content)
        return self.bundle_path

    def server_context(self, host: str, alpn: tuple[str, ...]) -> ssl.SSLContext:
        """A TLS server context showing a certificate for exactly `host`, a served host."""
        name = host.lower().rstrip(".")
        if destination(name) is None:
            raise ValueError(f"{host!r} is not a host the proxy serves: it gets no certificate")
        with self._lock:
            context = self._contexts.get((name, alpn))
            if context is None:
                context = self._new_context(name, alpn)
                self._contexts[(name, alpn)] = context
            return context

    def _new_context(self, name: str, alpn: tuple[str, ...]) -> ssl.SSLContext:
        self.ensure()
        certificate, key = sign_leaf(self.ca_path.read_bytes(), self.key_path.read_bytes(), (name,))
        leaves = self.folder / "hosts"
        leaves.mkdir(mode=0o700, exist_ok=True)
        # ssl loads certificates from files only; the key is written private from its first byte.
        chain_path, key_path = leaves / f"{name}.pem", leaves / f"{name}-key.pem"
        write_atomically(key_path, key)
        write_atomically(chain_path, certificate + self.ca_path.read_bytes())
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(chain_path, key_path)
        context.set_alpn_protocols(list(alpn))
        return context


def _system_bundle() -> Path | None:
    """The bundle this process trusts: $SSL_CERT_FILE (which may add a TLS-inspecting proxy's CA),
    else the system's."""
    explicit = os.environ.get("SSL_CERT_FILE")
    if explicit and os.path.isfile(explicit):
        return Path(explicit)
    found = system_bundles()
    if found:
        return Path(found[0])
    default = ssl.get_default_verify_paths().cafile
    return Path(default) if default else None
