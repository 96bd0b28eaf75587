"""docs/reference/cli.md is the page the generator writes from the commands as they are now."""

from __future__ import annotations

import difflib

import click

from aiptrain._cli import reference
from aiptrain._cli.main import root
from aiptrain._submit.flags import SUBMIT_FLAGS
from tests.docs.manual import DOCS

PAGE = DOCS / "reference" / "cli.md"


def test_the_cli_reference_is_up_to_date() -> None:
    written, current = PAGE.read_text(encoding="utf-8"), reference.render()
    if written != current:
        diff = "".join(list(difflib.unified_diff(written.splitlines(keepends=True), current.splitlines(keepends=True),
                                                 "docs/reference/cli.md", "the commands now"))[:40])
        raise AssertionError(f"docs/reference/cli.md is stale: regenerate it with `make docs` "
                             f"(.venv/bin/{reference.REGENERATE}) and commit it\n{diff}")


def test_the_reference_names_every_command_and_every_submit_flag() -> None:
    text = reference.render()

    def commands(group: click.Group, path: list[str]) -> list[str]:
        found = []
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                found += commands(command, [*path, name])
            else:
                found.append(" ".join([*path, name]))
        return found

    for command in commands(root, ["aiptrain"]):
        assert f"## `{command}`" in text, command
    submit = text[text.index("## `aiptrain jobs submit training`"):]
    submit = submit[:submit.index("\n## ", 1)]
    for entry in SUBMIT_FLAGS:
        row = next(line for line in submit.splitlines() if line.startswith(f"| `{entry.flag}"))
        assert (f"`{entry.field}`" if entry.field else "| - |") in row, row


def test_a_changed_help_text_makes_the_page_stale(monkeypatch) -> None:
    # The check above can fail: a help text edited in the code no longer matches the page.
    from aiptrain._cli.jobs import list_jobs

    option = next(param for param in list_jobs.params if param.name == "limit")
    monkeypatch.setattr(option, "help", "At most this many jobs, newest first.")
    assert reference.render() != PAGE.read_text(encoding="utf-8")
