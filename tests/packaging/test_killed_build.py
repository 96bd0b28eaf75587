"""What a submitter killed while packaging leaves (its copy of the sources in the temporary
directory, a staging directory in the build cache) is swept by the next build, and only that."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from aiptrain._packaging import build_package

SLOW_SETUP = textwrap.dedent("""
    import os, time
    from setuptools import setup
    if os.environ.get("SLOW_BUILD"):
        time.sleep(120)
    setup(name="trainer", version="0.1", packages=["trainer"])
""")


def _project(root: Path) -> Path:
    package = root / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text("print('hi')\n")
    (package / "weights.bin").write_bytes(os.urandom(1 << 20))
    (root / "setup.py").write_text(SLOW_SETUP)
    return package


def _build_in_a_process(package: Path, cache: Path, temp: Path, *, slow: bool) -> subprocess.Popen[bytes]:
    script = "import sys; from pathlib import Path; from aiptrain._packaging import build_package; " \
             "build_package(Path(sys.argv[1]), cache_dir=Path(sys.argv[2]))"
    env = {**os.environ, "TMPDIR": str(temp), **({"SLOW_BUILD": "1"} if slow else {})}
    return subprocess.Popen([sys.executable, "-c", script, str(package), str(cache)], env=env,
                            start_new_session=True)


def _wait_for(condition: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_the_sources_copied_by_a_killed_submitter_are_swept_by_the_next_build(tmp_path: Path) -> None:
    package = _project(tmp_path / "project")
    cache, temp = tmp_path / "cache", tmp_path / "tmp"
    temp.mkdir()
    killed = _build_in_a_process(package, cache, temp, slow=True)
    _wait_for(lambda: any(temp.glob("aiptrain-build-*/src/trainer/weights.bin")))
    os.killpg(killed.pid, signal.SIGKILL)  # the submitter and the build it started
    killed.wait()
    leftover = next(temp.glob("aiptrain-build-*"))

    # The next build sweeps it; a build in progress elsewhere (a live owner) is left alone.
    busy = _build_in_a_process(package, cache, temp, slow=True)
    try:
        _wait_for(lambda: any(path.parent.parent.parent != leftover
                              for path in temp.glob("aiptrain-build-*/src/trainer/weights.bin")))
        assert not leftover.exists()
        busy_copy = next(temp.glob("aiptrain-build-*"))
        finished = _build_in_a_process(package, cache, temp, slow=False)
        assert finished.wait(timeout=120) == 0
        assert list(temp.glob("aiptrain-build-*")) == [busy_copy]
    finally:
        os.killpg(busy.pid, signal.SIGKILL)
        busy.wait()


def test_a_staging_directory_of_a_killed_build_is_swept_from_the_cache(tmp_path: Path) -> None:
    package = _project(tmp_path / "project")
    cache = tmp_path / "cache"
    cache.mkdir()
    # A process that made its staging directory the way a build does, then was killed.
    maker = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, tempfile
        from aiptrain._packaging.leftovers import STAGING_PREFIX, owned_prefix
        staged = tempfile.mkdtemp(dir=sys.argv[1], prefix=owned_prefix(STAGING_PREFIX))
        open(staged + "/trainer-0.1.tar.gz", "wb").write(b"x" * 4096)
        print(staged, flush=True)
        sys.stdin.read()
    """), str(cache)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert maker.stdout is not None
    staged = Path(maker.stdout.readline().strip())
    maker.kill()
    maker.wait()
    assert staged.is_dir()
    build_package(package, cache_dir=cache)
    assert not staged.exists()
    assert not list(cache.glob(".tmp-*"))
