"""Checks that turn jobs which could only fail later into refusals at submit time.

- A `gs://` object name must be a plain path: `gs://bkt/../etc` or `gs://bkt/a//b` name nothing
  that Cloud Storage or the local store would map back to the same place; and at most 1,024 bytes,
  Cloud Storage's limit.
- A local `--packages` file must be an archive pip can install (a tarball, a wheel or a zip).
- Trainer arguments must fit an exec() call: Linux refuses any single argument of 128 KiB or
  more (MAX_ARG_STRLEN) and any argument holding a NUL byte, and the service capped the whole
  request well below a megabyte.
"""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from aiptrain.errors import Problem

# Cloud Storage's longest object name, in bytes of UTF-8.
MAX_OBJECT_NAME_BYTES = 1024
MAX_ARG_BYTES = 128 * 1024 - 1
MAX_ARGS_TOTAL_BYTES = 512 * 1024


def object_name_problem(uri: str) -> str | None:
    """Why the object part of a gs:// URI is not a plain path, or None."""
    _, _, name = uri.removeprefix("gs://").partition("/")
    segments = name.split("/") if name else []
    if segments and segments[-1] == "":
        segments.pop()  # `gs://b/dir/` names a folder: fine
    if any(segment in ("", ".", "..") for segment in segments) or "\0" in name:
        return "the object name must be a plain path (no '.', '..' or empty segments)"
    if "\r" in name or "\n" in name:
        return "object names cannot contain carriage returns or line feeds"
    size = len(name.encode("utf-8", errors="surrogatepass"))
    if size > MAX_OBJECT_NAME_BYTES:
        return f"the object name has {size} bytes; Cloud Storage allows at most {MAX_OBJECT_NAME_BYTES}"
    return None


def archive_problem(path: Path) -> str | None:
    """Why a local package file is not an archive pip could install, or None."""
    try:
        if tarfile.is_tarfile(path) or zipfile.is_zipfile(path):
            return None
    except OSError as error:
        return f"cannot be read: {error.strerror or error}"
    return "is not a package archive (a .tar.gz sdist, a .whl or a .zip)"


def args_problems(args: Sequence[str] | None) -> list[tuple[int | None, str]]:
    """(index of the argument or None for all of them, what is wrong) for trainer arguments."""
    problems: list[tuple[int | None, str]] = []
    total = 0
    for index, arg in enumerate(args or []):
        size = len(arg.encode("utf-8", errors="surrogatepass"))
        total += size + 1
        if "\0" in arg:
            problems.append((index, "holds a NUL character, which no command line can carry"))
        elif size > MAX_ARG_BYTES:
            problems.append((index, f"is {size} bytes long; a single argument may have at most {MAX_ARG_BYTES}"))
    if total > MAX_ARGS_TOTAL_BYTES:
        problems.append((None, f"the arguments take {total} bytes; at most {MAX_ARGS_TOTAL_BYTES} are allowed"))
    return problems


def check_package_archives(entries: Sequence[str]) -> list[Problem]:
    """A Problem on `--packages` for each existing local file that is not an archive."""
    problems = []
    for entry in entries:
        path = Path(entry.strip())
        if entry.strip() and not entry.startswith("gs://") and path.is_file():
            problem = archive_problem(path)
            if problem:
                problems.append(Problem("--packages", f"{path} {problem}",
                                        "build it first (python -m build), or use --package-path"))
    return problems
