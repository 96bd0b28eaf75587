"""A certificate authority of this installation, and the certificate it signs for Google's storage hosts.

TensorFlow's GCS filesystem only speaks HTTPS to `www.googleapis.com` and
`storage.googleapis.com`. To answer it locally, the replicas' proxy terminates TLS for those two
names with a certificate signed by a CA that exists only on this machine
(`$AIPTRAIN_HOME/ca/`, the private keys readable by the owner only), and the replicas trust it
through `CURL_CA_BUNDLE`. Nothing else trusts this CA, and the proxy never serves any other name.

Both are made once and reused. The first use holds a lock while it writes them (each file renamed
into place complete), so concurrent jobs never see a key and a certificate that do not match.
"""

from __future__ import annotations

import datetime
import fcntl
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiptrain._paths import HomeLayout

# The names the replicas' proxy answers for (and the only ones its certificate names).
STORAGE_HOSTS = ("www.googleapis.com", "storage.googleapis.com")
_VALID_DAYS = 3650


@dataclass(frozen=True)
class ServerIdentity:
    ca_path: Path  # the CA certificate: what the replicas trust (CURL_CA_BUNDLE)
    certificate_path: Path  # the server certificate for STORAGE_HOSTS, then the CA (a chain)
    key_path: Path


def storage_identity(home: Path) -> ServerIdentity:
    """The CA and the storage hosts' certificate under `home/ca`, made on first use."""
    folder = HomeLayout(home).ca
    identity = ServerIdentity(folder / "ca.pem", folder / "storage-chain.pem", folder / "storage-key.pem")
    if identity.ca_path.is_file():
        return identity
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not identity.ca_path.is_file():
            ca_pem, chain_pem, key_pem = _issue()
            # The CA last: whoever finds it finds the matching key and chain in place.
            write_atomically(identity.key_path, key_pem)
            write_atomically(identity.certificate_path, chain_pem)
            write_atomically(identity.ca_path, ca_pem)
    return identity


def _issue() -> tuple[bytes, bytes, bytes]:
    """(CA certificate, server certificate + CA, server key), all PEM."""
    ca, ca_key = new_authority("aiptrain local storage CA (this machine only)")
    certificate, key = sign_leaf(ca, ca_key, STORAGE_HOSTS)
    return ca, certificate + ca, key


def new_authority(common_name: str) -> tuple[bytes, bytes]:
    """A CA that may sign server certificates only (path length 0): (certificate, key), PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)
    until = now + datetime.timedelta(days=_VALID_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
        ), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return _pem_certificate(ca), _pem_key(ca_key)


def sign_leaf(ca_pem: bytes, ca_key_pem: bytes, hosts: tuple[str, ...]) -> tuple[bytes, bytes]:
    """A server certificate for exactly `hosts` (no wildcard), signed by the CA: (certificate, key), PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)
    until = min(now + datetime.timedelta(days=_VALID_DAYS), ca.not_valid_after_utc)
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(until)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host) for host in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return _pem_certificate(server), _pem_key(key)


def _pem_certificate(certificate: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    pem: bytes = certificate.public_bytes(serialization.Encoding.PEM)
    return pem


def _pem_key(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    pem: bytes = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pem


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all; keys (`*key.pem`) readable by the owner only."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, 0o600 if path.name.endswith("key.pem") else 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def extended_system_bundle(identity: ServerIdentity, system_bundle: Path) -> Path:
    """A copy of the system's CA bundle with the installation's CA appended (`system_trust`), under
    `home/ca`, rewritten only when either changed."""
    path = identity.ca_path.with_name("system-bundle.pem")
    content = system_bundle.read_bytes().rstrip(b"\n") + b"\n" + identity.ca_path.read_bytes()
    try:
        if path.read_bytes() == content:
            return path
    except FileNotFoundError:
        pass
    write_atomically(path, content)
    return path
