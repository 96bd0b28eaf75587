"""`aiptrain topic [NAME]`: reference pages for a user who has the package but not the repository,
as `gcloud topic` had them.

Each topic is a page of the manual (docs/reference/NAME.md in a checkout) shipped in the wheel as
package data under `aiptrain/data/topics/` (symlinks to the pages in a checkout), printed as it is
written: plain Markdown reads as text.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from aiptrain.errors import UsageError

# name -> what the page covers (the list `aiptrain topic` prints)
TOPICS = {
    "formats": "--format: gcloud's output formats (json, yaml, value(), csv(), table(), ...) and their keys",
    "filters": "--filter: gcloud's filter language for `jobs list`",
    "configurations": "gcloud's configurations, and where each shared option's value comes from",
}

_PAGES = Path(__file__).resolve().parent.parent / "data" / "topics"


def topic_page(name: str) -> Path:
    """The shipped page of topic `name`."""
    return _PAGES / f"{name}.md"


def topic_list() -> str:
    width = max(len(name) for name in TOPICS)
    lines = [f"  {name.ljust(width)}  {summary}" for name, summary in TOPICS.items()]
    return "\n".join(["Topics (aiptrain topic NAME):", *lines])


@click.command("topic")
@click.argument("name", required=False)
def topic(name: str | None) -> int:
    """Print a reference page: formats, filters or configurations (without NAME, the list)."""
    if name is None:
        click.echo(topic_list())
        return 0
    if name not in TOPICS:
        raise UsageError(f"no topic {name!r}", hint=f"use one of: {', '.join(TOPICS)} (aiptrain topic lists them)")
    text = topic_page(name).read_text(encoding="utf-8")
    if sys.stdout.isatty():
        click.echo_via_pager(text)
    else:
        click.echo(text, nl=False)
    return 0
