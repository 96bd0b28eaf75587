"""gcloud's `--flags-file=YAML_FILE`: flags read from a YAML (or JSON) file, put where it stands.

The file holds a mapping of flags to values, or a list of such mappings for a flag given more than
once. As in gcloud: a value is YAML (quotes and special characters need no shell escaping); an
empty value or `true` sets a switch, `false` leaves it out (a flag that takes true/false gets the
word); a list becomes one comma-separated
value and a mapping `KEY=VALUE,...`; a file may name another `--flags-file`, but not itself
(directly or through others). What follows it on the command line wins over what it sets, since
the flags it holds take its place.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

FLAG = "--flags-file"


def _word_flags() -> frozenset[str]:
    from aiptrain._submit.flags import SUBMIT_FLAGS, Kind

    return frozenset(entry.flag for entry in SUBMIT_FLAGS if entry.kind is Kind.BOOL_WORD)


_WORD_FLAGS = _word_flags()


def expand_flags_files(args: list[str], seen: tuple[Path, ...] = ()) -> list[str]:
    """`args` with every --flags-file before a bare `--` replaced by the flags of its file."""
    expanded: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            return [*expanded, *args[index:]]
        if arg == FLAG or arg.startswith(FLAG + "="):
            if arg == FLAG:
                if index + 1 >= len(args):
                    raise click.UsageError(f"{FLAG} needs a file name: {FLAG}=FLAGS.yaml")
                index += 1
                name = args[index]
            else:
                name = arg[len(FLAG) + 1:]
            expanded += _flags_of(Path(name), seen)
        else:
            expanded.append(arg)
        index += 1
    return expanded


def _flags_of(path: Path, seen: tuple[Path, ...]) -> list[str]:
    import yaml

    resolved = path.resolve()
    if resolved in seen:
        raise click.UsageError(f"{FLAG} {path}: the file includes itself (through {FLAG})")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise click.UsageError(f"{FLAG}: cannot read {path}: {error.strerror or error}") from None
    except yaml.YAMLError as error:
        raise click.UsageError(f"{FLAG} {path}: not valid YAML/JSON: {error}") from None
    groups = data if isinstance(data, list) else [data]
    args: list[str] = []
    for group in groups:
        if not isinstance(group, dict):
            raise click.UsageError(f"{FLAG} {path}: expected a mapping of flags to values (--region: us-central1), "
                                   f"or a list of them, not {type(group).__name__}")
        for flag, value in group.items():
            if not isinstance(flag, str) or not flag.startswith("--"):
                raise click.UsageError(f"{FLAG} {path}: {flag!r} is not a flag: write it with its dashes "
                                       "(--region: us-central1)")
            if flag == FLAG:
                for nested in value if isinstance(value, list) else [value]:
                    args += _flags_of(path.parent / str(nested), (*seen, resolved))
                continue
            args += _flag_args(flag, value)
    return args


def _flag_args(flag: str, value: Any) -> list[str]:
    if value is None:
        return [flag]
    if isinstance(value, bool):
        # A switch takes no value: true sets it, false leaves it out; a flag taking a word
        # (--use-chief-in-tf-config=true) gets the word.
        return [f"{flag}={'true' if value else 'false'}"] if flag in _WORD_FLAGS else [flag] if value else []
    return [f"{flag}={_text(value)}"]


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(_text(item) for item in value)
    if isinstance(value, dict):
        return ",".join(f"{key}={_text(item)}" for key, item in value.items())
    return str(value)
