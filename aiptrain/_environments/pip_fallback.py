"""Installing a trainer package with the runtime's own pip, as the service did, where uv refuses it.

uv refuses some metadata the pip of the runtimes' day accepted (pandas before 0.25's
`pytz (>=2011k)`, a Requires-Python of `>=3.`) and cannot build some old sdists. For such a
package pip runs in a throw-away virtual environment of the runtime's interpreter whose one `.pth`
file puts the job's site directory (what the packages before this one added) and then the runtime
environment on its path: pip sees the runtime's packages as installed, keeps those that satisfy
("Requirement already satisfied"), installs the rest into the throw-away environment ("Not
uninstalling ..., outside environment"), and never touches the shared environment. What it added
is then moved into the site directory. The runtime's packages shown in the site directory for uv
(`overlay`) are set aside meanwhile: metadata without its files (setuptools' entry points, which
register its commands) would hide the real ones from the builds pip runs.
pip takes its packages from the index of the job's day (`dated_index`), and from nowhere else:
no configuration file, no find-links.
On a Python 2.7 environment, which uv cannot drive, every trainer package is installed this way,
the throw-away environment made by virtualenv (`virtualenv_build`) and pip being the runtime's 20.3.4.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from aiptrain._environments import overlay, virtualenv_build
from aiptrain._environments.pip_config import pip_environment
from aiptrain._environments.store import Environment
from aiptrain._environments.uv import uv_binary, uv_environment

_PTH = "aiptrain-runtime.pth"
Run = Callable[[list[str], dict[str, str]], "int | None"]  # argv, env -> exit code (None: cancelled)


def install(package: Path, environment: Environment, site: Path, work: Path, *, index_url: str,
            env: Mapping[str, str], run: Run) -> int | None:
    """pip-install `package` for `environment` into `site`; pip's exit code (None: cancelled). `run`
    runs a command with its output going to the job's log."""
    venv = work / "pip-venv"
    shutil.rmtree(venv, ignore_errors=True)
    base = str(environment.manifest().get("python") or environment.python)
    if environment.python2:  # uv makes no Python 2 environment: virtualenv, as the runtime's was made
        tool = virtualenv_build.virtualenv_tool(environment.tools, env)
        virtualenv_build.make_venv(tool, base, venv, env)
    else:
        created = subprocess.run([uv_binary(), "venv", "--quiet", "--python", base, str(venv)],
                                 env=uv_environment(dict(env)), capture_output=True, text=True, check=False)
        if created.returncode != 0:
            raise OSError(f"cannot make pip's environment: {created.stderr.strip()}")
    (own,) = overlay.site_packages(venv)
    (own / _PTH).write_text("".join(f"{path}\n" for path in [site, *overlay.site_packages(environment.root)]))
    before = {entry.name for entry in own.iterdir()}
    argv = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-build-isolation", "--progress-bar", "off",
            str(package)]
    aside = work / "shown-aside"
    shown = [info for info in site.glob("*.dist-info") if (info / overlay.MARKER).exists()]
    aside.mkdir(exist_ok=True)
    for info in shown:
        info.rename(aside / info.name)
    try:
        code = run(argv, pip_environment(env, index_url))
        if code == 0:
            _move_new_entries(own, before, site)
    finally:
        for info in shown:
            (aside / info.name).rename(info)
        shutil.rmtree(venv, ignore_errors=True)
    return code


def _move_new_entries(own: Path, before: set[str], site: Path) -> None:
    """What pip added to its environment, into `site`: a distribution it installed replaces an
    earlier install of the same name there (the runtime's shown ones, set aside, stay until
    `overlay.remove`)."""
    added = sorted(entry for entry in own.iterdir() if entry.name not in before and entry.name != "__pycache__")
    names = {overlay.normalise(entry.name.split("-")[0]) for entry in added if entry.name.endswith(".dist-info")}
    for info in site.glob("*.dist-info"):
        if overlay.normalise(info.name.split("-")[0]) in names:
            _remove_distribution(site, info)
    for entry in added:
        target = site / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        shutil.move(str(entry), str(target))


def _remove_distribution(site: Path, info: Path) -> None:
    """Delete the files a distribution's RECORD lists (inside `site` only), then its metadata."""
    try:
        record = (info / "RECORD").read_text(encoding="utf-8", errors="replace")
    except OSError:
        record = ""
    site_root = os.path.realpath(site)
    for line in record.splitlines():
        relative = line.split(",", 1)[0]
        path = os.path.realpath(os.path.join(site, relative)) if relative else ""
        if path.startswith(site_root + os.sep):
            try:
                os.unlink(path)
            except OSError:
                pass
    shutil.rmtree(info, ignore_errors=True)
