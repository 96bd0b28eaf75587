"""An image's system CA bundle with the job's endpoints' CA added, mounted over the image's own.

TensorFlow before 2.4 ignores CURL_CA_BUNDLE and trusts only the system's bundle: a process
replica is shown an extended copy of this machine's in a mount namespace (`replicas.system_trust`);
a container is shown its *image's* bundle extended the same way, so that everything else it
trusted it still trusts. The bundle is read once per image (a container created, not started,
and copied from) and kept under the cache directory by the image's id.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from collections.abc import Sequence
from pathlib import Path

from aiptrain._replicas.containers.container_engine import ContainerEngine

# Where images keep their system bundle (Debian and Ubuntu, Alpine; Fedora, RHEL and CentOS).
BUNDLE_PATHS = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


def _image_bundle(engine: ContainerEngine, image: str, name: str, label_options: Sequence[str]) -> tuple[str, bytes] | None:
    """(its path, its content) of the image's system bundle; None when it has none."""
    created = engine.run(["create", "--pull", "never", "--name", name, *label_options, "--", image], check=False)
    if created.returncode != 0:
        return None
    try:
        for path in BUNDLE_PATHS:
            copied = engine.run(["cp", "--follow-link", f"{name}:{path}", "-"], check=False)
            if copied.returncode != 0:
                continue
            with tarfile.open(fileobj=io.BytesIO(copied.stdout)) as archive:
                member = next((m for m in archive.getmembers() if m.isfile()), None)
                content = archive.extractfile(member) if member is not None else None
                if content is not None:
                    return path, content.read()
        return None
    finally:
        engine.run(["rm", "--force", name], check=False)


def extended_bundle(engine: ContainerEngine, image: str, image_id: str, certificates: Sequence[Path],
                    directory: Path, probe_name: str, label_options: Sequence[str]) -> tuple[Path, str] | None:
    """(the extended bundle on this machine, the path to mount it at in the image), made once per
    image and set of certificates under `directory`; None when the image has no system bundle."""
    added = b"".join(path.read_bytes().rstrip(b"\n") + b"\n" for path in certificates)
    key = hashlib.sha256(image_id.encode() + b"\0" + added).hexdigest()[:32]
    for index, path in enumerate(BUNDLE_PATHS):
        made = directory / f"{key}-{index}.pem"
        if made.exists():
            return made, path
    found = _image_bundle(engine, image, probe_name, label_options)
    if found is None:
        return None
    path, content = found
    directory.mkdir(parents=True, exist_ok=True)
    made = directory / f"{key}-{BUNDLE_PATHS.index(path)}.pem"
    partial = made.with_name(f"{made.name}.{os.getpid()}")
    partial.write_bytes(content.rstrip(b"\n") + b"\n" + added)
    os.replace(partial, made)
    return made, path
