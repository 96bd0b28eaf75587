"""The README's examples work as written: the Quick start block runs in a shell, in an empty
directory, with the installed `aiptrain` on PATH; the install and completion lines say true things.

The trainer runs with this test interpreter's TensorFlow (AIPTRAIN_LOCAL_PYTHON, set for every
test by tests/conftest.py) instead of runtime 2.11's environment, which the suite does not build
here (tests/environments builds and checks those).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)


def test_the_quick_start_runs_as_written(tmp_path: Path) -> None:
    (block,) = shell_blocks(section("Quick start"))
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Job [my_job_1] submitted successfully." in done.stderr
    assert "master-replica-0" in done.stderr and "worker-replica-0" in done.stderr  # the streamed logs
    lines = done.stdout.splitlines()
    assert lines[-1] == "SUCCEEDED"  # `jobs describe my_job_1 --format 'value(state)'`
    assert any(line.split()[:2] == ["my_job_1", "SUCCEEDED"] for line in lines)  # `jobs list`
    assert (tmp_path / "my_trainer" / "sample_data").is_dir()


def test_install_is_from_the_checkout_and_says_what_the_extras_are_for() -> None:
    install = section("Install")
    assert "pip install -e ." in install
    assert "`trainer`" in install and "Jobs do not need it" in install
    assert "Linux" in install and "macOS is untested" in install
    assert not re.search(r"pip install ['\"]?aiptrain", README), "aiptrain is not on PyPI"


def test_the_completion_line_gives_a_completion_script() -> None:
    (block,) = [b for b in shell_blocks(section("Install")) if "_AIPTRAIN_COMPLETE" in b]
    bash_line = next(line for line in block.splitlines() if "bash_source" in line)
    command = re.search(r'"\$\((.*)\)"', bash_line)
    assert command is not None
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    script = subprocess.run(["bash", "-c", command.group(1)], env=env, capture_output=True, text=True,
                            timeout=60, check=True).stdout
    assert "_aiptrain_completion()" in script and "complete " in script
