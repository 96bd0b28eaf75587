"""What a package root holds: the checks on --package-path, and the files that make up the project.

Skipped when walking: caches, VCS metadata, virtualenvs, egg-info, compiled bytecode, setuptools'
top-level build/ and dist/, and what the root's `.gcloudignore` names. The digest of the files
(paths, executable bits, contents) is what the cache key and a generated version hash.
"""

from __future__ import annotations

# Only what a cache hit needs is imported at module level (see aiptrain/_packaging/__init__.py).
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

# `typing.TYPE_CHECKING` without importing typing (mypy knows the name): for annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from aiptrain.errors import Problem

# A package root with more files than this is almost certainly not a trainer project.
MAX_SOURCE_FILES = 50_000
SETUP_FILES = ("setup.py", "setup.cfg", "pyproject.toml")
# Directory names skipped anywhere in the tree.
_SKIPPED_DIRS = frozenset({
    "__pycache__", ".git", ".hg", ".svn", ".tox", ".nox", ".venv", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", ".eggs",
})
# Directory names skipped only at the top of the root: setuptools' own output.
_SKIPPED_TOP_DIRS = frozenset({"build", "dist"})
_SKIPPED_FILE_SUFFIXES = (".pyc", ".pyo")
_SKIPPED_FILES = frozenset({".DS_Store"})


class SourceFile:
    """One file of the package root."""

    __slots__ = ("absolute", "executable", "relative")

    def __init__(self, relative: str, absolute: Path, executable: bool) -> None:
        self.relative = relative  # POSIX path under the package root
        self.absolute = absolute
        self.executable = executable


def _problem(path: str, message: str, hint: str | None = None) -> Problem:
    from aiptrain.errors import Problem

    return Problem(path, message, hint)


def check_package_path(path: Path | str) -> list[Problem]:
    """Everything wrong with a --package-path, without building anything."""
    flag = "--package-path"
    package_dir = Path(os.path.abspath(Path(path).expanduser()))
    if not package_dir.exists():
        return [_problem(flag, f"{package_dir} does not exist",
                         "point --package-path at your trainer package directory, e.g. trainer/")]
    if not package_dir.is_dir():
        return [_problem(flag, f"{package_dir} is not a directory",
                         "--package-path names the package directory (the one with __init__.py), "
                         "not a module or an archive; pass archives with --packages")]
    problems: list[Problem] = []
    if package_dir.parent == package_dir:
        return [_problem(flag, "the package directory cannot be the filesystem root",
                         "move the trainer package into a project directory")]
    if not (package_dir / "__init__.py").is_file():
        problems.append(_problem(
            flag,
            f"{package_dir} is not a Python package: it has no __init__.py",
            _missing_init_hint(package_dir),
        ))
    root = package_dir.parent
    if not any((root / name).is_file() for name in SETUP_FILES) and not package_dir.name.isidentifier():
        problems.append(_problem(
            flag,
            f"{package_dir.name!r} is not a valid Python package name, so `python -m "
            f"{package_dir.name}.task` could not import it",
            f"rename the directory (letters, digits and underscores), or add a setup.py in {root}",
        ))
    return problems


def _missing_init_hint(package_dir: Path) -> str:
    create = f"create {package_dir / '__init__.py'} (it may be empty)"
    nested = sorted(p.parent for p in package_dir.glob("*/__init__.py"))
    own_modules = [p for p in package_dir.glob("*.py") if p.name != "setup.py"]
    looks_like_project = any((package_dir / name).is_file() for name in SETUP_FILES)
    if nested and (looks_like_project or not own_modules):
        # Pointed at the project directory instead of the package inside it.
        return (f"--package-path must point at the package directory itself; did you mean "
                f"--package-path {nested[0]}? Otherwise {create}")
    return (f"{create}; --package-path must point at the package directory itself, e.g. "
            "trainer/, not at its parent")


def check_duplicate_basenames(files: Iterable[Path | str]) -> list[Problem]:
    """Two packages with one file name would land on the same object name (gcloud refuses too)."""
    by_name: dict[str, list[str]] = {}
    for file in files:
        by_name.setdefault(Path(file).name, []).append(str(file))
    return [
        _problem("--packages", f"cannot upload multiple packages with the same file name: {name}",
                 f"rename one of {', '.join(paths)}")
        for name, paths in sorted(by_name.items())
        if len(paths) > 1
    ]


def collect_sources(root: Path, *, skip: Iterable[Path] = (), only: str | None = None) -> list[SourceFile]:
    """The files under `root` that make up the project, sorted by relative path.

    With `only`, just that top-level directory of `root` is walked (`root`'s `.gcloudignore`
    still applies).

    Skipped: VCS metadata, caches, virtualenvs (any directory holding a pyvenv.cfg), egg-info
    directories, compiled bytecode, setuptools' top-level build/ and dist/, and whatever the
    root's `.gcloudignore` names (see `aiptrain._packaging.ignore_file`). Symlinked files and directories
    are followed (each real directory once).
    """
    from aiptrain._packaging.ignore_file import load_ignore_file

    ignored = load_ignore_file(root)
    skipped = {Path(os.path.abspath(p)) for p in skip}
    files: list[SourceFile] = []
    seen_dirs: set[str] = set()
    for current, dirnames, filenames in os.walk(root, followlinks=True):
        here = Path(current)
        real = os.path.realpath(here)
        if real in seen_dirs:
            dirnames[:] = []
            continue
        seen_dirs.add(real)
        top = here == root
        prefix = "" if top else here.relative_to(root).as_posix() + "/"
        dirnames[:] = sorted(
            d for d in dirnames
            if not (top and only is not None and d != only)
            and d not in _SKIPPED_DIRS
            and not d.endswith(".egg-info")
            and not (top and d in _SKIPPED_TOP_DIRS)
            and not (here / d / "pyvenv.cfg").exists()
            and (here / d) not in skipped
            and not (ignored and ignored(prefix + d, True))
        )
        for filename in filenames:
            if (top and only is not None) or filename in _SKIPPED_FILES \
                    or filename.endswith(_SKIPPED_FILE_SUFFIXES):
                continue
            path = here / filename
            relative = prefix + filename
            _check_utf8_name(relative, root)
            if not path.is_file() or (ignored and ignored(relative, False)):
                continue  # dangling symlink, socket, ..., or named in .gcloudignore
            executable = bool(path.stat().st_mode & 0o111)
            files.append(SourceFile(relative, path, executable))
        if len(files) > MAX_SOURCE_FILES:
            from aiptrain.errors import UsageError

            raise UsageError(
                f"the package root {root} holds more than {MAX_SOURCE_FILES} files",
                hint="the package root is the parent of --package-path; move the trainer "
                "package into a directory of its own",
            )
    return sorted(files, key=lambda f: f.relative)


def _check_utf8_name(relative: str, root: Path) -> None:
    """A file name that is not UTF-8 cannot go into an sdist (its PAX header is UTF-8) nor into a
    gs:// object name: refused naming the file, before setuptools fails on it with a traceback."""
    try:
        relative.encode("utf-8")
    except UnicodeEncodeError:
        from aiptrain.errors import ValidationFailed

        shown = os.fsencode(relative).decode("utf-8", errors="backslashreplace")
        raise ValidationFailed([_problem(
            "--package-path", f"the file name '{shown}' under {root} is not UTF-8",
            "rename the file (e.g. `convmv -f latin1 -t utf8`), or list it in .gcloudignore")]) from None


def check_package_survives_ignore_file(sources: list[SourceFile], name: str) -> None:
    """check_package_path saw an __init__.py on disk; only .gcloudignore can have dropped it."""
    init = f"{name}/__init__.py"
    if not any(source.relative == init for source in sources):
        from aiptrain._packaging.ignore_file import IGNORE_FILE_NAME
        from aiptrain.errors import ValidationFailed

        raise ValidationFailed([_problem(
            IGNORE_FILE_NAME,
            f"it excludes {init}, so the package would not contain the trainer",
            f"remove the pattern that matches {name}/ or {init}, or add `!{init}` after it",
        )])


def source_digest(sources: Iterable[SourceFile]) -> str:
    """sha256 over relative paths, executable bits and file contents."""
    digest = hashlib.sha256()
    for source in sources:
        try:
            content = file_sha256(source.absolute)
        except OSError as exc:
            from aiptrain.errors import UsageError

            raise UsageError(f"cannot read {source.absolute}: {exc.strerror or exc}") from exc
        mode = "x" if source.executable else "-"
        digest.update(f"{source.relative}\0{mode}\0{content}\n".encode())
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(1024 * 1024):
            digest.update(block)
    return digest.hexdigest()
