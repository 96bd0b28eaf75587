"""Reading a `--config` file defensively: bounded size, UTF-8, bounded nesting.

A config is a few KB of YAML. Whatever the path names (a device such as /dev/zero, a FIFO, a
huge or binary file, a YAML bomb), reading it ends in a ValidationFailed naming `--config`,
never in an exception from deep inside the parser or an unbounded read. A key given twice in one
mapping is refused too, with both lines: YAML loaders keep the last silently, so a second
`workerCount` further down would change the job without anyone noticing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiptrain._submit.nesting import nesting_problem
from aiptrain.errors import Problem, ValidationFailed

MAX_CONFIG_BYTES = 1024 * 1024


def _refuse(path: Path, message: str, hint: str) -> ValidationFailed:
    return ValidationFailed([Problem("--config", f"{path}: {message}", hint)])


def read_config_text(path: Path) -> str:
    """The file's text; refused if it is a directory, too large, or not UTF-8."""
    try:
        if path.is_dir():  # a pipe (`<(...)`, /dev/stdin) is fine: the read below is bounded
            raise _refuse(path, "is a directory", "pass the path of a YAML or JSON file")
        with path.open("rb") as stream:
            data = stream.read(MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise _refuse(path, f"cannot read it: {error.strerror or error}", "check the path") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise _refuse(path, f"is larger than {MAX_CONFIG_BYTES // 1024} KiB; a Job config is a few KB",
                      "pass the Job's YAML or JSON file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _refuse(path, f"is not UTF-8 text (byte {error.start})",
                      "save the file as UTF-8 YAML or JSON") from None


def parse_config_yaml(path: Path, text: str) -> Any:
    """The YAML document in `text` (yaml errors propagate); refused if nested too deep or too big."""
    import yaml

    try:
        data = yaml.load(text, Loader=_unique_key_loader())  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise _refuse(path, "is nested too deeply to read", "a Job config nests a few levels deep") from None
    except _DuplicateKey as duplicate:
        raise _refuse(path, f"the key {duplicate.key!r} is given twice (lines {duplicate.first} and "
                      f"{duplicate.second})", "keep one of them") from None
    problem = nesting_problem(data)
    if problem:
        raise _refuse(path, f"cannot be used: {problem}", "write the Job's fields out plainly")
    return data


class _DuplicateKey(Exception):
    def __init__(self, key: object, first: int, second: int) -> None:
        super().__init__(key)
        self.key, self.first, self.second = key, first, second


def _unique_key_loader() -> Any:
    """yaml.SafeLoader that raises _DuplicateKey for a key repeated within one mapping."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        pass

    def construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
        seen: dict[object, int] = {}
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base` may be overridden by design
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise _DuplicateKey(key, seen[key], line)
                seen[key] = line
            except TypeError:
                continue  # an unhashable key: the loader itself refuses it
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return UniqueKeyLoader
