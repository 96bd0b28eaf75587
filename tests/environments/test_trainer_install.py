"""A trainer's packages installed as pip installed them in the runtime's day, on a small real runtime
environment (Python 3.7, built here with uv): the runtime's packages kept where they satisfy and
replaced where pinned, open requirements resolved as of the day, the runtime's pip behind an index of
the day for what uv refuses, and one install-cache entry per (packages, environment, day)."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from aiptrain._environments import install_cache
from aiptrain._environments.dated_index import DatedIndex
from aiptrain._environments.interpreters import find
from aiptrain._environments.preparation import install_packages
from aiptrain._environments.store import Environment, uv_config_text
from aiptrain._environments.uv import uv_binary, uv_environment
from aiptrain._job.era import ResolveDay
from aiptrain._packaging import build_package

from .test_install_cache import RecordingSink

pytestmark = pytest.mark.slow
DAY = ResolveDay(datetime.date(2020, 12, 19), "the test's day")


@pytest.fixture(scope="module")
def small_runtime(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    """A runtime of Python 3.7 whose image had six 1.15.0 and pytz 2020.4, and pandas 0.24.2, whose
    own metadata uv cannot parse (`pytz (>=2011k)`): the catalog's reading of it is in its uv config."""
    python = find("3.7", None)
    if python is None:
        pytest.skip("no Python 3.7 on this machine")
    root = tmp_path_factory.mktemp("small-runtime") / "env"
    env = uv_environment(dict(os.environ))
    config = {"pandas==0.24.2": ("python-dateutil>=2.5.0", "pytz>=2011", "numpy>=1.12.0")}
    subprocess.run([uv_binary(), "venv", "--quiet", "--seed", "--python", python.path, str(root)], env=env, check=True)
    (root / "aiptrain-uv.toml").write_text(uv_config_text(config))
    subprocess.run([uv_binary(), "pip", "install", "--quiet", "--python", str(root / "bin" / "python"),
                    "--config-file", str(root / "aiptrain-uv.toml"), "--exclude-newer", "2020-12-20T00:00:00Z",
                    "six==1.15.0", "pytz==2020.4", "pandas==0.24.2"], env=env, check=True)
    manifest = {"key": "small", "name": "runtime-small", "runtime": "small", "tensorflow": "none",
                "python": python.path, "python_version": "3.7", "cutoff": "2020-12-19", "fallback": False,
                "dependency_metadata": {k: list(v) for k, v in config.items()}}
    (root / "aiptrain-env.json").write_text(json.dumps(manifest))
    return Environment("small", root)


def _sdist(tmp_path: Path, name: str, requires: list[str]) -> Path:
    project = tmp_path / name
    (project / name).mkdir(parents=True)
    (project / name / "__init__.py").write_text("")
    (project / "setup.py").write_text("from setuptools import setup\n"
                                      f"setup(name={name!r}, version='0.1', packages=[{name!r}], "
                                      f"install_requires={requires!r})\n")
    return build_package(project / name, cache_dir=tmp_path / f"{name}-sdist").path


def _install(home: Path, packages: list[Path], runtime: Environment, day: ResolveDay, *,
             site: str = "site", on_day: Callable[[ResolveDay], None] | None = None) -> tuple[str | None, list[str]]:
    """Install into `home/site`, with the install cache of `home`."""
    sink = RecordingSink()
    problem = install_packages([str(p) for p in packages], site_dir=home / site, storage_root=home / "storage",
                               python=runtime.python, base_env=dict(os.environ), run_token="era-test", sink=sink,
                               stop=threading.Event(), kill_grace=3.0, environment=runtime, day=day, on_day=on_day)
    return problem, sink.lines


def _distributions(site: Path) -> dict[str, str]:
    return dict(info.name.removesuffix(".dist-info").rsplit("-", 1)
                for info in site.glob("*.dist-info"))


def test_pins_replace_the_runtimes_packages_and_open_requirements_resolve_as_of_the_day(
        small_runtime: Environment, tmp_path: Path) -> None:
    trainer = _sdist(tmp_path, "eratrainer", ["six", "pytz==2020.1", "tabulate", "pandas"])
    problem, lines = _install(tmp_path, [trainer], small_runtime, DAY)
    assert problem is None, "\n".join(lines)
    # six and pandas were the runtime's and satisfied (kept there); pytz was pinned (replaced);
    # tabulate was open: 0.8.7 is its newest release by 2020-12-19 (0.8.8 came in 2021).
    assert _distributions(tmp_path / "site") == {"eratrainer": "0.1", "pytz": "2020.1", "tabulate": "0.8.7"}
    assert ("The trainer's requirements replace the runtime's pytz 2020.4 (now 2020.1), as pip replaced them in the "
            "image; the runtime's copies stay underneath.") in lines
    assert "Trainer packages resolve as of 2020-12-19 (the test's day): nothing published later is installed; " \
           "move the day with the label aiptrain-resolve-as-of or AIPTRAIN_RESOLVE_AS_OF." in lines
    assert not list((tmp_path / "site").glob("*/aiptrain-runtime"))  # nothing of the runtime's shown is left


def test_the_install_cache_keys_on_the_day(small_runtime: Environment, tmp_path: Path) -> None:
    trainer = _sdist(tmp_path, "daytrainer", ["tabulate"])
    for site in ("first", "again"):
        problem, lines = _install(tmp_path, [trainer], small_runtime, DAY, site=site)
        assert problem is None, "\n".join(lines)
    assert any(line.startswith("Reusing installed package(s)") and "resolved as of 2020-12-19" in line
               for line in lines)
    assert _distributions(tmp_path / "again")["tabulate"] == "0.8.7"
    later = ResolveDay(datetime.date(2022, 11, 1), "a later day")
    problem, lines = _install(tmp_path, [trainer], small_runtime, later, site="later")
    assert problem is None, "\n".join(lines)
    assert not any(line.startswith("Reusing") for line in lines)
    assert _distributions(tmp_path / "later")["tabulate"] == "0.9.0"  # 2022-10-06
    cache = install_cache.install_cache_dir(tmp_path)
    assert len([entry for entry in cache.iterdir() if not entry.name.startswith(".")]) == 2


def test_what_uv_refuses_the_runtimes_pip_installs_from_the_index_of_the_day(
        small_runtime: Environment, tmp_path: Path) -> None:
    # python-networkdays 1.0.2 (2020-12-28) says Requires-Python `>=3.`: uv skips its files as if
    # there were none, pip of the day accepts it. The day of a runtime after it lets it in.
    trainer = _sdist(tmp_path, "legacytrainer", ["python-networkdays==1.0.2", "six"])
    day = ResolveDay(datetime.date(2021, 3, 9), "runtime 2.1's day")
    problem, lines = _install(tmp_path, [trainer], small_runtime, day)
    assert problem is None, "\n".join(lines)
    said = [line for line in lines if line.startswith("uv cannot install legacytrainer-0.1.tar.gz's requirements")]
    assert len(said) == 1 and "installing it with the runtime's own pip, as the service did" in said[0]
    assert "from the package index of 2021-03-09" in said[0]
    assert _distributions(tmp_path / "site") == {"legacytrainer": "0.1", "python_networkdays": "1.0.2"}
    assert any("Requirement already satisfied: six" in line for line in lines)  # the runtime's, kept
    # Before its upload it is not on the index of the day at all, and the job says so.
    problem, _lines = _install(tmp_path / "before", [trainer], small_runtime, DAY)
    assert problem == ("Installing the trainer package legacytrainer-0.1.tar.gz failed: its requirement "
                       "python-networkdays==1.0.2 has no file on the package index published by 2020-12-19. Hint: "
                       "check the version, or run the job as of a later day (--labels "
                       "aiptrain-resolve-as-of=YYYY-MM-DD, or AIPTRAIN_RESOLVE_AS_OF).")


def test_a_pin_after_the_runtimes_day_moves_the_day_to_its_own(small_runtime: Environment, tmp_path: Path) -> None:
    # tabulate 0.8.9 came on 2021-02-22, after the runtime's day: the service, which installed a
    # trainer's requirements when the job was submitted, ran such a job after that day.
    trainer = _sdist(tmp_path, "laterpin", ["tabulate==0.8.9", "pytz"])
    runtime_day = ResolveDay(datetime.date(2020, 12, 19), "runtime small's day", pins_may_move=True)
    told: list[ResolveDay] = []
    problem, lines = _install(tmp_path, [trainer], small_runtime, runtime_day, on_day=told.append)
    assert problem is None, "\n".join(lines)
    assert _distributions(tmp_path / "site") == {"laterpin": "0.1", "tabulate": "0.8.9"}  # pytz: the runtime's
    said = [line for line in lines if "resolve as of" in line]
    assert said == ["Trainer packages resolve as of 2021-02-22: the trainer pins tabulate==0.8.9, published that "
                    "day, after runtime small's day (2020-12-19). Nothing published later is installed; set the "
                    "day with the label aiptrain-resolve-as-of or AIPTRAIN_RESOLVE_AS_OF."], said
    assert [day.label for day in told] == ["2021-02-22"]
    dates = install_cache.install_cache_dir(tmp_path) / ".release-dates" / "tabulate.json"
    assert json.loads(dates.read_text())["releases"]["0.8.9"] == "2021-02-22"
    # The next job of that package: the entry of the moved day.
    problem, lines = _install(tmp_path, [trainer], small_runtime, runtime_day, site="again")
    assert problem is None and "Reusing installed package(s)" in "\n".join(lines)
    assert any(line.startswith("Reusing") and "resolved as of 2021-02-22" in line for line in lines), lines


def test_a_pin_published_after_a_day_the_job_named_fails_naming_when_it_came(small_runtime: Environment,
                                                                              tmp_path: Path) -> None:
    trainer = _sdist(tmp_path, "newpin", ["tabulate==0.8.9"])
    problem, _lines = _install(tmp_path, [trainer], small_runtime, DAY)
    assert problem == ("Installing the trainer package newpin-0.1.tar.gz failed: its requirement tabulate==0.8.9 was "
                       "published on 2021-02-22, after 2020-12-19, the day the job's packages resolve as of (the "
                       "test's day). Hint: run the job as of a later day (--labels aiptrain-resolve-as-of=2021-02-22, "
                       "or AIPTRAIN_RESOLVE_AS_OF=2021-02-22), or relax the pin in the package's install_requires "
                       "(setup.py).")


def test_the_index_of_the_day_leaves_out_later_files_and_says_what_pip_needs(tmp_path: Path) -> None:
    import urllib.request

    # python-networkdays: 0.0.1 of 2020-06-14, 1.0.1 and 1.0.2 of 2020-12-28, 1.1 of 2021-09-13 (PyPI).
    with DatedIndex("2021-01-01T00:00:00Z", dict(os.environ)) as index:
        files = sorted(f.filename for f in index.files("python_networkdays") or [])
        assert files == ["python-networkdays-0.0.1.tar.gz", "python-networkdays-1.0.1.tar.gz",
                         "python-networkdays-1.0.2.tar.gz", "python_networkdays-0.0.1-py3-none-any.whl",
                         "python_networkdays-1.0.1-py3-none-any.whl", "python_networkdays-1.0.2-py3-none-any.whl"]
        assert index.has_version("python-networkdays", "1.0.2") and not index.has_version("python-networkdays", "1.1")
        page = urllib.request.urlopen(index.url + "python-networkdays/", timeout=60).read().decode()
        assert 'data-requires-python="&gt;=3.6"' in page and "#sha256=" in page and "1.1" not in page
