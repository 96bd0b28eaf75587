"""`.gcloudignore` at the package root: which files stay out of the trainer package.

gcloud reads this file for its source uploads (App Engine, Cloud Functions, Cloud Build) but not
for `ai-platform jobs submit training`, which packages everything next to the trainer, data and
notebooks included. aiptrain honours it there too, with gcloud's syntax:

- gitignore patterns, one per line: `#` comments, `!` negation, a trailing `/` for directories
  only, a leading `/` to anchor at the package root, `*`, `?`, `[...]` and `**`;
- `#!include:FILE` splices in the patterns of FILE (relative to the package root, typically
  `.gitignore`) at that point; an included file cannot include another, as in gcloud.

As in git, a file inside an ignored directory cannot be brought back by a later `!` pattern: the
directory is not walked at all.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

# `typing.TYPE_CHECKING` without importing typing, which a cache hit of the build never loads.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

IGNORE_FILE_NAME = ".gcloudignore"
_INCLUDE_DIRECTIVE = "#!include:"

# ignored(relative POSIX path under the package root, is_directory) -> bool
IgnoreMatcher = Callable[[str, bool], bool]


def load_ignore_file(root: Path) -> IgnoreMatcher | None:
    """The matcher of `root/.gcloudignore`, or None when there is no such file."""
    path = root / IGNORE_FILE_NAME
    if not path.is_file():
        return None
    import pathspec  # only projects that have the file pay for the import

    spec = pathspec.GitIgnoreSpec.from_lines(_expanded_lines(root, path, nested=False))

    def ignored(relative: str, is_directory: bool) -> bool:
        return bool(spec.match_file(relative + "/" if is_directory else relative))

    return ignored


def _expanded_lines(root: Path, path: Path, *, nested: bool) -> list[str]:
    lines: list[str] = []
    for line in _read_lines(path):
        if not line.startswith(_INCLUDE_DIRECTIVE):
            lines.append(line)
            continue
        included = line[len(_INCLUDE_DIRECTIVE):].strip()
        if nested:
            _refuse(f"{path.name} is included from {IGNORE_FILE_NAME} and includes {included} in turn",
                    f"copy the patterns of {included} into {IGNORE_FILE_NAME}; includes do not nest")
        target = root / included
        if not included or not target.is_file():
            _refuse(f"`{line.strip()}` names a file that does not exist in {root}",
                    "give a path relative to the package root (e.g. #!include:.gitignore), or remove the line")
        lines.extend(_expanded_lines(root, target, nested=True))
    return lines


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        _refuse(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}",
                "make it a readable UTF-8 text file, or remove it")


def _refuse(message: str, hint: str) -> NoReturn:
    from aiptrain.errors import Problem, ValidationFailed

    raise ValidationFailed([Problem(IGNORE_FILE_NAME, message, hint)])
