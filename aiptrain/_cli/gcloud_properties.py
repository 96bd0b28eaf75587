"""gcloud's properties as gcloud itself resolves them, read (never written) for aiptrain's defaults.

The active configuration is `--configuration`, else $CLOUDSDK_ACTIVE_CONFIG_NAME, else the name in
the `active_config` file; its properties are the INI file `configurations/config_NAME` in gcloud's
directory ($CLOUDSDK_CONFIG, else ~/.config/gcloud). A directory without `active_config` has not
been set up by gcloud yet: gcloud's first run makes `default` from the old single `properties`
file there (or empty), so that file is what counts. A property's environment variable
(CLOUDSDK_SECTION_NAME) wins over the file, and a flag over both, as in gcloud. Only the
properties aiptrain uses are read.
"""

from __future__ import annotations

import configparser
import os
import re
from dataclasses import dataclass
from pathlib import Path

from aiptrain.errors import UsageError

# gcloud's rule for configuration names.
_NAME = re.compile(r"^[a-z][-a-z0-9]*$")
PROPERTIES = ("core/project", "compute/region", "ai_platform/region", "api_endpoint_overrides/ml",
              "api_endpoint_overrides/aiplatform")


def config_dir() -> Path:
    explicit = os.environ.get("CLOUDSDK_CONFIG")
    return Path(explicit).expanduser() if explicit else Path.home() / ".config" / "gcloud"


@dataclass(frozen=True)
class GcloudProperties:
    configuration: str
    values: dict[str, str]

    def get(self, name: str) -> str | None:
        return self.values.get(name) or None


def active_configuration(flag: str | None, directory: Path) -> tuple[str, bool, Path]:
    """The configuration's name, whether it was asked for by name (flag or environment), and the
    file its properties are in."""
    if flag or os.environ.get("CLOUDSDK_ACTIVE_CONFIG_NAME"):
        name = flag or os.environ["CLOUDSDK_ACTIVE_CONFIG_NAME"]
        return name, True, directory / "configurations" / f"config_{name}"
    try:
        named = (directory / "active_config").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return "default", False, directory / "properties"
    except OSError:
        named = ""
    name = named or "default"
    return name, False, directory / "configurations" / f"config_{name}"


def read_properties(configuration: str | None = None) -> GcloudProperties:
    """The properties of the active configuration, environment variables applied over the file.

    A configuration named by `--configuration` or $CLOUDSDK_ACTIVE_CONFIG_NAME must exist (exit 2
    otherwise, as gcloud refuses it); an unreadable or missing file otherwise counts as empty.
    """
    directory = config_dir()
    name, named, path = active_configuration(configuration, directory)
    source = "--configuration" if configuration else "CLOUDSDK_ACTIVE_CONFIG_NAME"
    if named and not _NAME.match(name):
        raise UsageError(f"{source}: {name!r} is not a gcloud configuration name",
                         hint="names are lowercase letters, digits and hyphens, starting with a letter")
    if named and name != "default" and not path.is_file():
        raise UsageError(f"{source}: the gcloud configuration [{name}] does not exist in {directory}",
                         hint="`gcloud config configurations list` shows them; or leave the option out")
    values: dict[str, str] = {}
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        parser = configparser.ConfigParser(interpolation=None)  # gcloud would refuse it too; aiptrain ignores it
    for prop in PROPERTIES:
        section, key = prop.split("/")
        if parser.has_option(section, key):
            values[prop] = parser.get(section, key).strip()
        from_env = os.environ.get(f"CLOUDSDK_{section}_{key}".upper())
        if from_env is not None:
            values[prop] = from_env
    return GcloudProperties(name, values)
