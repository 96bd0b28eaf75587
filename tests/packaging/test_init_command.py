"""`aiptrain init DIR`: copies the template into a new project, refuses to overwrite anything."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from click.testing import CliRunner

from aiptrain._cli.init import init
from aiptrain._cli.main import root
from aiptrain._packaging.template import TEMPLATE_ENTRIES, init_project, template_root
from tests.fixtures.template import REPO_ROOT, TEMPLATE_DIR, trainer_environment


def test_init_copies_the_template_and_prints_next_steps(tmp_path):
    project = tmp_path / "digits"
    result = CliRunner().invoke(init, [str(project)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    for name in TEMPLATE_ENTRIES:
        assert (project / name).exists(), name
    assert (project / "trainer" / "task.py").read_text() == (TEMPLATE_DIR / "trainer" / "task.py").read_text()
    assert not list(project.rglob("__pycache__"))
    assert "trainer/task.py" in result.stdout
    assert '--train-files "$PWD/sample_data/train-*.csv"' in result.stdout, "the shell must expand $PWD"
    assert len(list((project / "sample_data").glob("train-*.csv"))) == 2
    assert "aiptrain jobs submit training my_job_1 --package-path trainer/ --module-name trainer.task" in result.stdout


def test_init_into_an_existing_empty_directory(tmp_path):
    result = init_project(tmp_path)
    assert Path("trainer/sync_loop.py") in result.files
    assert Path("README.md") in result.files


def test_init_refuses_a_non_empty_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    result = CliRunner().invoke(root, ["init", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 2
    assert "is not empty" in result.stderr and "hint:" in result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt"]


def test_init_refuses_a_file(tmp_path):
    target = tmp_path / "taken"
    target.write_text("")
    result = CliRunner().invoke(root, ["init", str(target)], catch_exceptions=False)
    assert result.exit_code == 2
    assert "not a directory" in result.stderr


def test_copied_project_runs(tmp_path):
    project = tmp_path / "digits"
    init_project(project)
    completed = subprocess.run(
        [sys.executable, "-m", "trainer.make_data", "--output-dir", "data", "--shards", "2"],
        cwd=project, env=trainer_environment(), capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert len(list((project / "data").glob("train-*.csv"))) == 2


def test_template_is_found_in_the_checkout():
    assert template_root().resolve() == TEMPLATE_DIR.resolve()


def test_wheel_ships_the_template(tmp_path):
    """A non-editable install finds the template as package data, away from any checkout."""
    source = tmp_path / "src"
    source.mkdir()
    # A copy keeps the build's egg-info and build/ directories out of the checkout.
    for name in ("pyproject.toml", "README.md", "scale_tiers.yaml"):
        shutil.copy2(REPO_ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "data")
    shutil.copytree(REPO_ROOT / "aiptrain", source / "aiptrain", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(TEMPLATE_DIR, source / "trainer_template", ignore=ignore)
    env = trainer_environment()
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)],
        env=env, check=True, capture_output=True, timeout=300,
    )
    (wheel,) = wheels.glob("aiptrain-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("trainer/task.py", "setup.py", "README.md", "config.yaml", "sample_data/eval-00000-of-00001.csv"):
        assert f"aiptrain/data/template/{name}" in names

    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site), str(wheel)],
        env=env, check=True, capture_output=True, timeout=300,
    )
    probe = "from aiptrain._packaging.template import template_root; print(template_root())"
    found = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env={**env, "PYTHONPATH": str(site)},
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.strip()
    assert Path(found) == site / "aiptrain" / "data" / "template"
    assert (Path(found) / "trainer" / "task.py").is_file()
