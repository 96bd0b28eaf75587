"""The command-line reference page (docs/reference/cli.md), written from the commands themselves.

`python -m aiptrain._cli.reference docs/reference/cli.md` (or `make docs`) rewrites the page;
without a path it prints it. Every command, argument and option comes from the click commands of
`aiptrain/_cli/`; the flags of `jobs submit training` that set a job field come from the flag table
(`aiptrain/_submit/flags.py`), with the field each sets. A test compares the page with `render()`,
so a changed flag or help text fails until the page is regenerated.

Never imported by `aiptrain` itself: the page is built in a checkout.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from aiptrain._cli.jobs import TrainingCommand
from aiptrain._submit.flags import FLAGS_BY_NAME

REGENERATE = "python -m aiptrain._cli.reference docs/reference/cli.md"

_INTRO = f"""\
# Command-line reference

Every command and option of `aiptrain`, as `aiptrain COMMAND --help` shows them. This page is
generated from the click commands (`aiptrain/_cli/`) and the submit flag table
(`aiptrain/_submit/flags.py`) by `make docs`, which runs
`{REGENERATE}`: change those, then regenerate.

For what the values mean see [output formats](formats.md), [filters](filters.md),
[gcloud's configurations](configurations.md), [exit codes](exit-codes.md) and
[settings](settings.md).
"""


_ENV_NOTE = re.compile(r"\s*\[env: [^\]]*\]")


def _cell(text: str) -> str:
    """`text` as one Markdown table cell: one line, pipes escaped, without the `[env: ...]` notes
    of help texts (the table has a column for the variables)."""
    return " ".join(_ENV_NOTE.sub("", text).split()).replace("|", "\\|")


def _doc(command: click.Command) -> str:
    """The command's whole help text, as paragraphs (click's `\\b` and `\\f` markers handled)."""
    text = inspect.cleandoc(command.help or "").split("\f", 1)[0]
    paragraphs = [" ".join(line.strip() for line in block.splitlines() if line.strip() != "\b")
                  for block in text.split("\n\n")]
    return "\n\n".join(paragraph for paragraph in paragraphs if paragraph)


def _envvars(param: click.Parameter) -> str:
    names = param.envvar if isinstance(param.envvar, list | tuple) else [param.envvar] if param.envvar else []
    return ", ".join(f"`{name}`" for name in names)


def _option_row(param: click.Option, ctx: click.Context) -> tuple[str, str]:
    """(the option as typed, its help with default and range) from click's own help record."""
    record = param.get_help_record(ctx)
    assert record is not None  # hidden options are skipped by the caller
    return record


def _usage(path: list[str], command: click.Command, ctx: click.Context) -> str:
    arguments = [param.make_metavar(ctx) for param in command.params if isinstance(param, click.Argument)]
    options = ["[OPTIONS]"] if any(isinstance(p, click.Option) for p in command.params) else []
    # Commands that take the trainer's arguments after `--` (submit training, local train).
    extra = ["[-- USER_ARGS]"] if isinstance(command, TrainingCommand) else []
    return " ".join([*path, *options, *arguments, *extra])


def _walk(command: click.Command, path: list[str],
          parent: click.Context | None) -> Iterator[tuple[list[str], click.Command, click.Context]]:
    """(path, command, context) for every command below `command`, depth first, in listed order."""
    ctx = click.Context(command, info_name=path[-1], parent=parent)
    yield path, command, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            child = command.get_command(ctx, name)
            if child is not None and not child.hidden:
                yield from _walk(child, [*path, name], ctx)


def _shared_section(root: click.Group, leaf: click.Command, ctx: click.Context,
                    ) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """The shared options, as a command (`leaf`) has them: on a group they carry no variable."""
    names = {param.name for param in root.params}
    lines = ["## Options every command takes", "",
             "Before or after the command, as gcloud's global flags (`aiptrain --format json jobs list` and",
             "`aiptrain jobs list --format json` are the same; the one after the command wins). A flag wins",
             "over its variable, and the variable over [gcloud's configuration](configurations.md).", "",
             "| option | variable | meaning |", "|---|---|---|"]
    shared: dict[str, tuple[str, str]] = {}
    for param in leaf.params:
        if not isinstance(param, click.Option) or param.hidden or param.name not in names - {"version", "help"}:
            continue
        typed, help_text = _option_row(param, ctx)
        shared[param.name or ""] = (typed, help_text)
        lines.append(f"| `{_cell(typed)}` | {_envvars(param)} | {_cell(help_text)} |")
    return lines, shared


def _is_shared(param: click.Option, ctx: click.Context, shared: dict[str, tuple[str, str]]) -> bool:
    """One of the shared options (a command's own --project with other help is not)."""
    known = shared.get(param.name or "")
    return known is not None and _option_row(param, ctx)[1].split("  [")[0] == known[1].split("  [")[0]


def _command_section(path: list[str], command: click.Command, ctx: click.Context,
                     shared: dict[str, tuple[str, str]]) -> list[str]:
    lines = [f"## `{' '.join(path)}`", "", f"`{_usage(path, command, ctx)}`", ""]
    doc = _doc(command)
    if doc:
        lines += [doc, ""]
    options = [param for param in command.params
               if isinstance(param, click.Option) and not param.hidden and param.name != "help"
               and not _is_shared(param, ctx, shared)]
    # The submit command is the one that has every flag of the table.
    is_submit = set(FLAGS_BY_NAME) <= {param.opts[0] for param in options}
    job_flags = [param for param in options if is_submit and param.opts[0] in FLAGS_BY_NAME]
    own = [param for param in options if param not in job_flags]
    if job_flags:
        lines += ["The job's flags (the submit flag table: each sets the field named, under `trainingInput`",
                  "unless it says otherwise; flags win over `--config`):", "",
                  "| flag | job field | meaning |", "|---|---|---|"]
        for param in job_flags:
            typed, help_text = _option_row(param, ctx)
            field = FLAGS_BY_NAME[param.opts[0]].field
            lines.append(f"| `{_cell(typed)}` | {f'`{field}`' if field else '-'} | {_cell(help_text)} |")
        lines.append("")
        if own:
            lines += ["The command's own flags:", ""]
    if own:
        lines += ["| option | variable | meaning |", "|---|---|---|"]
        for param in own:
            typed, help_text = _option_row(param, ctx)
            lines.append(f"| `{_cell(typed)}` | {_envvars(param)} | {_cell(help_text)} |")
        lines.append("")
    if any(isinstance(param, click.Option) and _is_shared(param, ctx, shared) for param in command.params) \
            and not isinstance(command, click.Group):
        lines += ["And the [options every command takes](#options-every-command-takes).", ""]
    return lines


def render() -> str:
    """The page, from the commands as they are now."""
    from aiptrain._cli.main import root

    commands = [(path, command, ctx) for path, command, ctx in _walk(root, ["aiptrain"], None)
                if not isinstance(command, click.Group)]  # a group's help is its commands' list
    leaf = next(command for _, command, _ in commands if command.name == "describe")
    shared_lines, shared = _shared_section(root, leaf, click.Context(leaf, info_name="describe"))
    lines = [_INTRO, *shared_lines, ""]
    for path, command, ctx in commands:
        if command.name != path[-1]:  # one command under a second name (jobs logs is jobs stream-logs)
            canonical = " ".join([*path[:-1], command.name or ""])
            anchor = re.sub(r"[^a-z0-9 -]", "", canonical.lower()).replace(" ", "-")
            lines += [f"## `{' '.join(path)}`", "", f"Another name for [`{canonical}`](#{anchor}).", ""]
            continue
        lines += _command_section(path, command, ctx, shared)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if not argv:
        sys.stdout.write(text)
        return 0
    Path(argv[0]).write_text(text, encoding="utf-8")
    print(f"wrote {argv[0]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
