"""Where a job's files live under $AIPTRAIN_HOME/jobs (not to be confused with its --job-dir)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from aiptrain._paths import HomeLayout
from aiptrain.errors import OperationalError

_SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")


@dataclass(frozen=True)
class JobLayout:
    root: Path

    @classmethod
    def of(cls, home: Path, project: str, job_id: str, key: int) -> JobLayout:
        # Job IDs and project IDs are path-safe once validated; anything else falls back to the key.
        if _SAFE_SEGMENT.match(project) and _SAFE_SEGMENT.match(job_id):
            return cls(HomeLayout(home).jobs / project / job_id)
        return cls(HomeLayout(home).jobs / "_by_key" / str(key))

    def claim(self, run_token: str) -> None:
        """Make the directory this job's own before its supervisor starts.

        Job IDs are unique in a store, not forever: a store moved away to start empty, or a pruned
        job, leaves a directory a new job of the same ID would otherwise inherit (modules deleted
        from its package would still import). A directory not marked with this job's run token is
        such a leftover and is removed; the job's own (a restarted launch) is kept.
        """
        owner = self.root / ".run-token"
        try:
            if owner.read_text(encoding="ascii") == run_token:
                return
        except (FileNotFoundError, UnicodeDecodeError):
            pass
        if self.root.exists():
            # Renamed first: a half-removed directory is never taken for the job's own.
            aside = self.root.with_name(f".{self.root.name}.replaced-{os.getpid()}-{secrets.token_hex(4)}")
            self.root.rename(aside)
            shutil.rmtree(aside, ignore_errors=True)
        self.root.mkdir(parents=True)
        owner.write_text(run_token, encoding="ascii")

    @property
    def site_dir(self) -> Path:
        """The trainer package(s), installed with pip --target; the replicas' PYTHONPATH."""
        return self.root / "site"

    @property
    def work_dir(self) -> Path:
        """Replicas run in work/<task name> (work/<trial>/<task name> for tuning trials)."""
        return self.root / "work"

    @property
    def supervisor_log(self) -> Path:
        return self.root / "supervisor.log"

    @property
    def container_engine(self) -> Path:
        """Which container engine the job's containers run on (written before it creates any), so
        that they can be removed after a supervisor that died."""
        return self.root / "container-engine.json"

    @property
    def scratch_record(self) -> Path:
        """The job's scratch directories outside these files (its TMPDIR, its container sets'), so
        that they are removed after a supervisor that died (`replicas.scratch`)."""
        return self.root / "scratch-directories"

    @property
    def space_reserve(self) -> Path:
        """A file the supervisor holds while the job runs and deletes when the disk is full, so the
        job's end can still be written."""
        return self.root / "space-reserve"


def run_limit_line(limit: int) -> str:
    """What the machine's limit on running jobs is, in the words `describe` and the queue use."""
    return (f"at most {limit} job(s) run at once on this machine (AIPTRAIN_LOCAL_MAX_RUNNING, as set by the "
            "latest submit that set it)")


def path_list_entry(directory: Path) -> Path:
    """`directory` as one entry of a PATH-style list such as PYTHONPATH.

    A `:` is legitimate in $AIPTRAIN_HOME but is the list's separator, and no list can escape it:
    such a directory is given as a symlink to it, named after it, in a directory of this user's
    under the system's temporary directory.
    """
    if os.pathsep not in str(directory):
        return directory
    aliases = Path(tempfile.gettempdir()) / f"aiptrain-{os.getuid()}-paths"
    aliases.mkdir(mode=0o700, exist_ok=True)
    info = aliases.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise OperationalError(f"{aliases} is not a private directory of this user",
                               hint=f"remove it, or use an AIPTRAIN_HOME without {os.pathsep!r}")
    _forget_dangling(aliases)
    alias = aliases / hashlib.sha256(str(directory).encode()).hexdigest()[:32]
    if not (alias.is_symlink() and os.readlink(alias) == str(directory)):
        made = alias.with_name(f"{alias.name}.{os.getpid()}")
        made.unlink(missing_ok=True)
        made.symlink_to(directory)
        os.replace(made, alias)
    return alias


# A dangling alias older than this names a job directory that is gone (pruned, or its home removed).
_DANGLING_ALIAS_SECONDS = 3600.0


def _forget_dangling(aliases: Path) -> None:
    now = time.time()
    for alias in aliases.iterdir():
        with contextlib.suppress(OSError):
            if not alias.exists() and now - alias.lstat().st_mtime > _DANGLING_ALIAS_SECONDS:
                alias.unlink()
