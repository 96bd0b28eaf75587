"""uv is given pip's configuration: the index, extra indexes, find-links and certificates that
pip.conf files and PIP_* variables name, in pip's order, without overriding uv's own settings."""

from __future__ import annotations

import subprocess
from pathlib import Path

from aiptrain._environments.pip_config import pip_settings
from aiptrain._environments.uv import uv_binary, uv_environment


def _home_with(tmp_path: Path, user_conf: str) -> dict[str, str]:
    home = tmp_path / "home"
    (home / ".config" / "pip").mkdir(parents=True)
    (home / ".config" / "pip" / "pip.conf").write_text(user_conf)
    return {"HOME": str(home), "PATH": "/usr/bin:/bin", "XDG_CONFIG_DIRS": str(tmp_path / "no-xdg")}


def test_the_user_pip_conf_becomes_uv_settings(tmp_path: Path) -> None:
    env = _home_with(tmp_path, "[global]\nindex-url = https://mirror.example/simple\n"
                               "extra-index-url = https://a.example/simple\n  https://b.example/simple\n"
                               "cert = /etc/ssl/certs/ca-certificates.crt\n[install]\nfind-links = /opt/wheels\n")
    settings = pip_settings(env)
    variables = settings.uv_variables(env)
    assert variables["UV_INDEX_URL"] == "https://mirror.example/simple"
    assert variables["UV_EXTRA_INDEX_URL"] == "https://a.example/simple https://b.example/simple"
    assert variables["UV_FIND_LINKS"] == "/opt/wheels"
    assert variables["SSL_CERT_FILE"] == "/etc/ssl/certs/ca-certificates.crt"
    assert variables["UV_SYSTEM_CERTS"] == "1"
    assert variables["UV_INDEX_STRATEGY"] == "unsafe-best-match"  # pip's "best version on any index"
    described = settings.describe()
    assert described.startswith("Installing with package index https://mirror.example/simple (from ")
    assert "pip.conf" in described and "certificates /etc/ssl/certs/ca-certificates.crt" in described


def test_pip_variables_win_over_files_and_uv_settings_win_over_both(tmp_path: Path) -> None:
    env = _home_with(tmp_path, "[global]\nindex-url = https://from-file.example/simple\n")
    env["PIP_INDEX_URL"] = "https://from-variable.example/simple"
    assert pip_settings(env).uv_variables(env)["UV_INDEX_URL"] == "https://from-variable.example/simple"
    env["UV_INDEX_URL"] = "https://uv-own.example/simple"
    assert "UV_INDEX_URL" not in pip_settings(env).uv_variables(env)
    assert uv_environment(env)["UV_INDEX_URL"] == "https://uv-own.example/simple"


def test_without_any_pip_configuration_uv_keeps_its_default_index(tmp_path: Path) -> None:
    env = _home_with(tmp_path, "[global]\nindex-url = https://ignored.example/simple\n")
    env["PIP_CONFIG_FILE"] = "/dev/null"  # pip's switch for "no configuration files", this machine's too
    settings = pip_settings(env)
    assert settings.uv_variables(env) == {"UV_SYSTEM_CERTS": "1"}
    assert settings.describe().startswith("Installing with package index https://pypi.org/simple (the default)")


def test_uv_reads_the_index_it_was_given(tmp_path: Path) -> None:
    """A local find-links directory named only in pip.conf is where uv finds the package."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    project = tmp_path / "tiny"
    (project / "tiny_pkg").mkdir(parents=True)
    (project / "tiny_pkg" / "__init__.py").write_text("VALUE = 7\n")
    (project / "setup.py").write_text("from setuptools import setup\nsetup(name='tiny-pkg', version='3.1', "
                                      "packages=['tiny_pkg'])\n")
    env = _home_with(tmp_path, f"[global]\nfind-links = {wheels}\nno-index = true\n")
    uv_env = uv_environment({**env, "UV_NO_INDEX": "1", "UV_CACHE_DIR": str(tmp_path / "cache")})
    built = subprocess.run([uv_binary(), "build", "--wheel", "--out-dir", str(wheels), str(project)],
                           env=uv_env, capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr
    venv = tmp_path / "venv"
    made = subprocess.run([uv_binary(), "venv", str(venv)], env=uv_env, capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    installed = subprocess.run([uv_binary(), "pip", "install", "--python", str(venv / "bin" / "python"),
                                "tiny-pkg==3.1"], env=uv_env, capture_output=True, text=True, check=False)
    assert installed.returncode == 0, installed.stderr
