"""What the command-line tests share: a tiny trainer package (no TensorFlow)."""

from __future__ import annotations

from pathlib import Path

import pytest

TRAINER = """
import os, sys, time
mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
print("hello from", os.environ.get("CLOUD_ML_JOB_ID"), flush=True)
if mode == "fail":
    raise SystemExit("the trainer gave up")
if mode == "sleep":
    time.sleep(120)
print("bye", flush=True)
"""


@pytest.fixture
def trainer(tmp_path: Path) -> Path:
    package = tmp_path / "proj" / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text(TRAINER)
    return package
