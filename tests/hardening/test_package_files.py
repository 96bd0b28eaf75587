"""Trainer packages with awkward files: a name that is not UTF-8 is refused naming it (exit 2,
nothing staged or created); a file of hundreds of MB is streamed into the sdist, never held whole."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from click.testing import CliRunner

from aiptrain.cli.main import root
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


def test_a_big_file_is_streamed_into_the_sdist(tmp_path: Path) -> None:
    package = make_trainer(tmp_path)
    with open(package / "weights.bin", "wb") as stream:
        stream.truncate(BIG_FILE_BYTES)  # sparse: costs no disk, reads as zeros
    script = textwrap.dedent("""
        import resource, sys
        from pathlib import Path
        from aiptrain.packaging import build_package
        built = build_package(Path(sys.argv[1]), cache_dir=Path(sys.argv[2]))
        assert any(name.endswith("weights.bin") for name in built.files), built.files
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB on Linux
    """)
    done = subprocess.run([sys.executable, "-c", script, str(package), str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    peak_kib = int(done.stdout.strip().splitlines()[-1])
    assert peak_kib * 1024 < BIG_FILE_BYTES // 2, f"peak RSS {peak_kib} KiB for a {BIG_FILE_BYTES} byte file"
