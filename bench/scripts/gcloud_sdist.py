"""The packaging anchor: build a trainer's sdist the way gcloud did, in a fresh process.

    python bench/scripts/gcloud_sdist.py PACKAGE_ROOT OUTPUT_DIR

gcloud ran setuptools on the package root with its scratch directories moved out of the way:

    python setup.py egg_info --egg-base TMP build --build-base TMP --build-temp TMP sdist --dist-dir OUT

in a copy of the root when the root was not writable. Here the root is always copied first,
so the source tree stays clean and the work matches aiptrain's, which builds from a copy too.
Only roots with a setup.py are handled (the template has one), so no setup.py is generated.
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> int:
    root, output = Path(sys.argv[1]), Path(sys.argv[2])
    if not (root / "setup.py").is_file():
        print(f"{root} has no setup.py", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="gcloud-sdist-") as scratch:
        copy = Path(scratch) / "src"
        shutil.copytree(root, copy)
        work = Path(scratch) / "work"
        work.mkdir()
        argv = [sys.executable, "setup.py", "egg_info", "--egg-base", str(work), "build", "--build-base",
                str(work), "--build-temp", str(work), "sdist", "--dist-dir", str(output)]
        return subprocess.run(argv, cwd=copy, stdout=subprocess.DEVNULL, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
