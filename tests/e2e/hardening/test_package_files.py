"""Trainer packages with awkward files: a name that is not UTF-8 is refused naming it (exit 2,
nothing staged or created); a file of hundreds of MB is streamed into the sdist, never held whole."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from click.testing import CliRunner

from aiptrain._cli.main import root
from tests.cli.test_bad_invocations import created_jobs, make_trainer, stored_objects

BIG_FILE_BYTES = 300 * 1024 * 1024


def test_a_file_name_that_is_not_utf8_is_refused_naming_it(tmp_path: Path, isolated_environment: Path) -> None:
    package = make_trainer(tmp_path)
    (package / "data").mkdir()
    with open(os.path.join(os.fsencode(package / "data"), b"caf\xe9.csv"), "wb") as stream:
        stream.write(b"a,b\n")
    result = CliRunner().invoke(root, ["jobs", "submit", "training", "latin1_name", "--package-path", str(package),
                                       "--module-name", "trainer.task", "--region", "us-central1"],
                                catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert "--package-path" in result.stderr
    assert "caf\\xe9.csv" in result.stderr and "is not UTF-8" in result.stderr
    assert "Traceback" not in result.stderr
    assert stored_objects(isolated_environment) == []
    assert created_jobs(isolated_environment) == 0


def _peak_rss_of_a_build(package: Path, cache: Path) -> int:
    """Bytes of memory a fresh interpreter peaks at while building `package`."""
    script = textwrap.dedent("""
        import resource, sys
        from pathlib import Path
        from aiptrain._packaging import build_package
        build_package(Path(sys.argv[1]), cache_dir=Path(sys.argv[2]))
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB on Linux
    """)
    done = subprocess.run([sys.executable, "-c", script, str(package), str(cache)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip().splitlines()[-1]) * 1024


def test_a_big_file_is_streamed_into_the_sdist(tmp_path: Path) -> None:
    small = make_trainer(tmp_path / "small")
    big = make_trainer(tmp_path / "big")
    with open(big / "weights.bin", "wb") as stream:
        stream.truncate(BIG_FILE_BYTES)  # sparse: costs no disk, reads as zeros
    baseline = _peak_rss_of_a_build(small, tmp_path / "cache-small")
    peak = _peak_rss_of_a_build(big, tmp_path / "cache-big")
    # Read whole, the file alone would add its 300 MB; streamed, the build costs what a small one does.
    assert peak - baseline < BIG_FILE_BYTES // 3, f"peak {peak} bytes, {baseline} for a small package"
