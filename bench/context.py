"""What every row group gets: scratch space, cleanup, repetition counts, and trainer projects.

Trainer projects are copied into the scratch space before use, so builds and the trainers'
own runs never write into the repository (no __pycache__, no egg-info), and every side of a
comparison sees exactly the same tree.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.environment import REPO, TRAINERS, Cleanup

# Words printed without quotes ($SCRATCH must stay expandable).
_PLAIN_WORD = re.compile(r"[\w@%+=:,./$…-]+")
# What a copy of a project leaves out: build output, caches, and the template's generated data.
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist", "data", ".*")


@dataclass
class BenchContext:
    scratch: Path
    cleanup: Cleanup
    quick: bool = False
    rows: frozenset[str] = frozenset()  # --row: only these rows, in the groups that can measure some alone
    _projects: dict[str, Path] = field(default_factory=dict)

    def runs(self, full: int) -> int:
        """Repetitions for a row: `full` normally, 1 with --quick."""
        return 1 if self.quick else full

    def wants(self, row_id: str) -> bool:
        """Whether the run measures `row_id` (every row unless --row names some)."""
        return not self.rows or row_id in self.rows

    def project(self, name: str) -> Path:
        """The package root of a trainer project, copied once into scratch.

        "template" is the repository's trainer_template/; any other name is bench/trainers/NAME.
        The package directory (what --package-path names) is `<root>/trainer`.
        """
        if name not in self._projects:
            source = REPO / "trainer_template" if name == "template" else TRAINERS / name
            if not (source / "trainer" / "__init__.py").is_file():
                raise FileNotFoundError(f"no trainer package at {source / 'trainer'}")
            target = self.scratch / "projects" / name
            shutil.copytree(source, target, ignore=_IGNORED)
            self._projects[name] = target
        return self._projects[name]

    def package_path(self, name: str) -> Path:
        return self.project(name) / "trainer"

    def show(self, argv: Sequence[str | Path], *, home: bool = False, env: Mapping[str, str] | None = None) -> str:
        """A command as the report prints it: repository paths relative, scratch paths as $SCRATCH,
        and (with `home`) the fresh AIPTRAIN_HOME it ran with."""
        prefix = ["AIPTRAIN_HOME=$SCRATCH/home-…"] if home else []
        prefix += [f"{name}={value}" for name, value in (env or {}).items()]
        words = [self._relative(str(word)) for word in argv]
        return " ".join([*prefix, *(_quoted(word) for word in words)])

    def _relative(self, word: str) -> str:
        word = word.replace(str(self.scratch), "$SCRATCH")
        return word.replace(str(REPO) + "/", "")


def _quoted(word: str) -> str:
    if _PLAIN_WORD.fullmatch(word):
        return word
    if "$" in word and not any(c in word for c in '"\\`'):
        return f'"{word}"'  # keeps $SCRATCH expandable
    return shlex.quote(word)
