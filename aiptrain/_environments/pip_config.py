"""pip's configuration, given to uv: a machine where pip installs must be one where uv builds.

uv reads neither pip.conf nor `PIP_*` variables, and by default trusts only the certificates it
was built with, so behind a TLS-inspecting proxy (pip.conf: `cert = ...`) it fails with
`invalid peer certificate: UnknownIssuer` where pip works. What pip is configured with becomes
uv's own settings, unless uv's are set already: the index (`index-url` -> UV_INDEX_URL), extra
indexes, find-links, trusted hosts and the certificate bundle (`cert` -> SSL_CERT_FILE); and uv
always uses the system's trust store as well (UV_SYSTEM_CERTS). With several indexes, uv is told to
pick versions as pip does, the best match on any of them (UV_INDEX_STRATEGY=unsafe-best-match).

pip's files are read in pip's order, later ones winning: the site-wide files (/etc/xdg/pip/pip.conf,
/etc/pip.conf), the user's (~/.pip/pip.conf, ~/.config/pip/pip.conf), PIP_CONFIG_FILE; then the
`PIP_*` variables. In each file, `[install]` wins over `[global]`. PIP_CONFIG_FILE=/dev/null
turns the files off, as it does for pip.

The runtime's own pip (the pip fallback, Python 2.7 builds) is given the index of the day and
nothing else, with the certificate pip was configured with (`pip_environment`).
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

# pip's option -> (uv's variable, whether pip allows several whitespace-separated values)
_OPTIONS = {
    "index-url": ("UV_INDEX_URL", False),
    "extra-index-url": ("UV_EXTRA_INDEX_URL", True),
    "find-links": ("UV_FIND_LINKS", True),
    "trusted-host": ("UV_INSECURE_HOST", True),
    "cert": ("SSL_CERT_FILE", False),
}
_UV_SEPARATOR = {"UV_EXTRA_INDEX_URL": " ", "UV_FIND_LINKS": ",", "UV_INSECURE_HOST": " "}


@dataclass(frozen=True)
class PipSettings:
    values: dict[str, str] = field(default_factory=dict)  # pip option -> value
    sources: dict[str, str] = field(default_factory=dict)  # pip option -> the file or variable it came from

    def uv_variables(self, env: Mapping[str, str]) -> dict[str, str]:
        """uv's variables for these settings, leaving out any that `env` sets already."""
        variables = {"UV_SYSTEM_CERTS": "1"}
        if "extra-index-url" in self.values or "find-links" in self.values:
            # pip takes the best version found on any index; uv, by default, only the first index's.
            variables["UV_INDEX_STRATEGY"] = "unsafe-best-match"
        for option, value in self.values.items():
            name, several = _OPTIONS[option]
            if name in env:
                continue
            variables[name] = _UV_SEPARATOR[name].join(value.split()) if several else value.strip()
        return {name: value for name, value in variables.items() if name not in env}

    def describe(self) -> str:
        """One line for a build log: which index and certificates are used, and from where."""
        index = self.values.get("index-url")
        parts = [f"package index {index.strip()} (from {self.sources['index-url']})" if index
                 else "package index https://pypi.org/simple (the default)"]
        for option, label in (("extra-index-url", "extra index"), ("find-links", "find-links"),
                              ("cert", "certificates")):
            if option in self.values:
                parts.append(f"{label} {' '.join(self.values[option].split())} (from {self.sources[option]})")
        return "Installing with " + "; ".join(parts) + "; the system's trust store is used too."


def pip_settings(env: Mapping[str, str] | None = None) -> PipSettings:
    source = os.environ if env is None else env
    values: dict[str, str] = {}
    sources: dict[str, str] = {}
    for path in _config_files(source):
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (OSError, configparser.Error, UnicodeDecodeError):
            continue
        for section in ("global", "install"):
            if not parser.has_section(section):
                continue
            for option in _OPTIONS:
                if parser.has_option(section, option):
                    values[option] = parser.get(section, option)
                    sources[option] = str(path)
    for option in _OPTIONS:
        variable = "PIP_" + option.upper().replace("-", "_")
        if source.get(variable):
            values[option] = source[variable]
            sources[option] = variable
    return PipSettings(values, sources)


def _config_files(env: Mapping[str, str]) -> list[Path]:
    if env.get("PIP_CONFIG_FILE") == os.devnull:
        return []  # pip's way of saying "no configuration files at all"
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    xdg_dirs = env.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    config_home = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    files = [Path(d) / "pip" / "pip.conf" for d in xdg_dirs.split(":") if d]
    files += [Path("/etc/pip.conf"), home / ".pip" / "pip.conf", config_home / "pip" / "pip.conf"]
    if env.get("PIP_CONFIG_FILE"):
        files.append(Path(env["PIP_CONFIG_FILE"]))
    return [path for path in files if path.is_file()]


def pip_environment(env: Mapping[str, str], index_url: str) -> dict[str, str]:
    """pip's settings: the dated index only (no pip.conf, no PIP_* of the user's), the certificate
    pip was configured with, and no version check."""
    settings = pip_settings(env)
    clean = {name: value for name, value in env.items() if not name.startswith("PIP_")}
    clean.update({"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": index_url, "PIP_NO_INPUT": "1",
                  "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    cert = settings.values.get("cert", "").strip()
    if cert:
        clean["PIP_CERT"] = cert
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        clean.pop(name, None)
    return clean
