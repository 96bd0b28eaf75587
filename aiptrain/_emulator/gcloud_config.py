"""A gcloud configuration that points Google's own CLI at a running `aiptrain local serve`.

gcloud keeps named configurations as INI files, `configurations/config_NAME` under its config
directory ($CLOUDSDK_CONFIG, else ~/.config/gcloud). The file is written directly rather than with
`gcloud config set`, which would ask compute.googleapis.com whether the region exists. It sends ml
v1, Vertex AI and Cloud Logging to the emulator and Cloud Storage to the GCS emulator the server
fetches packages from (STORAGE_EMULATOR_HOST); without one, storage also goes to the emulator,
which refuses it, so no command of this configuration can reach a Google endpoint. gcloud's
credential is the emulator's token file (`auth/access_token_file`, read on each command, so a
server restarted on the same port is used with its new token as it is); a server started
with `--no-auth` gets no credentials at all. Usage reporting and update checks are off.
"""

from __future__ import annotations

import configparser
import io
import os
import re
from pathlib import Path

from aiptrain.errors import UsageError

# gcloud's rule for configuration names.
_NAME = re.compile(r"^[a-z][-a-z0-9]*$")


def gcloud_config_dir() -> Path:
    explicit = os.environ.get("CLOUDSDK_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    if os.name == "nt" and os.environ.get("APPDATA"):
        return Path(os.environ["APPDATA"]) / "gcloud"
    return Path.home() / ".config" / "gcloud"


def check_name(name: str) -> None:
    if not _NAME.match(name) or name == "none":
        raise UsageError(f"invalid gcloud configuration name {name!r}",
                         hint="use lowercase letters, digits and hyphens, starting with a letter (e.g. aiptrain)")


def render_configuration(url: str, *, project: str, region: str, storage_endpoint: str | None,
                         access_token_file: Path | None = None) -> str:
    """The INI text of the configuration; `url` is the emulator's base URL (ending in `/`)."""
    base = url if url.endswith("/") else url + "/"
    storage = f"{storage_endpoint.rstrip('/')}/storage/v1/" if storage_endpoint else f"{base}storage/v1/"
    config = configparser.ConfigParser(interpolation=None)
    config["core"] = {"project": project, "disable_usage_reporting": "true"}
    config["auth"] = ({"access_token_file": str(access_token_file)} if access_token_file is not None
                      else {"disable_credentials": "true"})
    config["component_manager"] = {"disable_update_check": "true"}
    config["compute"] = {"region": region}
    config["ai"] = {"region": region}
    config["api_endpoint_overrides"] = {"ml": base, "aiplatform": base, "logging": base, "storage": storage}
    text = io.StringIO()
    config.write(text)
    return text.getvalue()


def write_configuration(name: str, url: str, *, project: str, region: str,
                        storage_endpoint: str | None, config_dir: Path | None = None,
                        access_token_file: Path | None = None) -> Path:
    """Create (or replace) configuration `name`; its path. Activating it is left to the user."""
    check_name(name)
    directory = (config_dir or gcloud_config_dir()) / "configurations"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"config_{name}"
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(render_configuration(url, project=project, region=region, storage_endpoint=storage_endpoint,
                                            access_token_file=access_token_file), encoding="utf-8")
    partial.replace(path)
    return path
