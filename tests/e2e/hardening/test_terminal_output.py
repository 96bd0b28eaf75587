"""Control bytes a trainer prints reach a terminal as visible text, never as commands to it; the
JSON of the same job keeps them exact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiptrain._cli.terminal_text import for_terminal

PROJECT = "terminal-project"
HOSTILE = ["title\x1b]0;owned\x07set", "shown\rhidden", "nul\x00byte", "right\u202etxt.exe", "bell\x07c1\x9bend",
           "del\x7fend"]

TRAINER = f"""
import sys
for line in {HOSTILE!r}:
    print(line, flush=True)
sys.exit(3)
"""


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b[2J", "^[[2J"), ("a\rb", "a^Mb"), ("\x00", "^@"), ("\x7f", "^?"), ("\x9b", "\\x9b"),
    ("\u202e", "\\u202e"), ("tab\tstays", "tab\tstays"), ("line\nbreak", "line^Jbreak"), ("plain é ✓", "plain é ✓"),
])
def test_controls_are_shown_as_cat_v_shows_them(raw: str, shown: str) -> None:
    assert for_terminal(raw) == shown


def test_stream_logs_escapes_and_json_keeps_exact(tmp_path: Path) -> None:
    package = tmp_path / "project" / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text(TRAINER)
    env = {**os.environ, "AIPTRAIN_HOME": str(tmp_path / "home"), "NO_COLOR": "1",
           "AIPTRAIN_LOCAL_PYTHON": sys.executable}

    def aiptrain(*argv: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "aiptrain", *argv, "--project", PROJECT], env=env,
                              capture_output=True, timeout=300)

    submitted = aiptrain("jobs", "submit", "training", "controls", "--package-path", str(package),
                         "--module-name", "trainer.task", "--region", "us-central1", "--staging-bucket",
                         "gs://terminal-bucket", "--stream-logs")
    assert submitted.returncode == 10, submitted.stderr.decode(errors="replace")
    streamed = aiptrain("jobs", "stream-logs", "controls")
    for output in (submitted.stderr, streamed.stderr + streamed.stdout):
        text = output.decode()
        assert not [char for char in text if ord(char) < 0x20 and char not in "\t\n"], text
        assert "\x7f" not in text and "\x9b" not in text and "\u202e" not in text
        assert "title^[]0;owned^Gset" in text
        assert "shown^Mhidden" in text and "nul^@byte" in text and "right\\u202etxt.exe" in text
    described = aiptrain("jobs", "describe", "controls", "--format", "json")
    assert described.returncode == 0
    error_message = json.loads(described.stdout)["errorMessage"]
    assert "title\x1b]0;owned\x07set" in error_message and "shown\rhidden" in error_message
