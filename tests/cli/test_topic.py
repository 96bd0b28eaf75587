"""`aiptrain topic`: the reference pages a user who installed the package has, as `gcloud topic`
had them; the wheel carries them, and the help texts point there rather than at a README."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import click
from click.testing import CliRunner

from aiptrain._cli.main import root
from aiptrain._cli.topic import TOPICS
from tests.fixtures.wheel import build_wheel

REPO = Path(__file__).resolve().parents[2]
PAGES = REPO / "docs" / "reference"


def test_topic_alone_lists_the_topics() -> None:
    result = CliRunner().invoke(root, ["topic"])
    assert result.exit_code == 0, result.output
    listed = [line.split()[0] for line in result.output.splitlines()[1:]]
    assert listed == ["formats", "filters", "configurations"]


def test_each_topic_prints_its_page_of_the_manual() -> None:
    for name in TOPICS:
        result = CliRunner().invoke(root, ["topic", name])
        assert result.exit_code == 0, result.output
        assert result.output == (PAGES / f"{name}.md").read_text(encoding="utf-8")
    formats = CliRunner().invoke(root, ["topic", "formats"]).output
    assert "value(KEY, ...)" in formats and "--flatten" in formats


def test_an_unknown_topic_is_a_usage_error_that_lists_the_topics() -> None:
    result = CliRunner().invoke(root, ["topic", "format"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "no topic 'format'" in result.stderr
    assert "formats, filters, configurations" in result.stderr


def test_the_format_and_filter_help_point_at_the_topics_not_a_readme() -> None:
    def helps(command: click.Command, path: list[str]) -> dict[str, str]:
        found = {" ".join(path): CliRunner().invoke(root, [*path, "--help"]).output}
        for name, child in getattr(command, "commands", {}).items():
            found.update(helps(child, [*path, name]))
        return found

    texts = helps(root, [])
    assert [path for path, text in texts.items() if "README" in text] == []
    assert "see `aiptrain topic formats`" in " ".join(texts["jobs list"].split())
    assert "see `aiptrain topic filters`" in " ".join(texts["jobs list"].split())


def test_topic_imports_nothing_heavy() -> None:
    # Namespace packages' .pth files (google-cloud-aiplatform's) may load `google` at start-up:
    # count only what the command adds.
    probe = ("import sys\nbefore = set(sys.modules)\nfrom aiptrain._cli.main import root\n"
             "try:\n    root.main(args=['topic', 'filters'], prog_name='aiptrain')\nexcept SystemExit:\n    pass\n"
             "print('\\n'.join(sorted(set(sys.modules) - before)))\n")
    output = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    loaded = set(output.split())
    assert "aiptrain._cli.topic" in loaded
    assert sorted(name for name in loaded if name.startswith(("google", "pydantic", "yaml", "aiptrain.job"))) == []


def test_the_wheel_carries_the_topic_pages(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        for name in TOPICS:
            shipped = archive.read(f"aiptrain/data/topics/{name}.md").decode("utf-8")
            assert shipped == (PAGES / f"{name}.md").read_text(encoding="utf-8"), name
