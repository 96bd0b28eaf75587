"""The packaging subject: aiptrain's build of a trainer package, in a fresh process.

    python bench/scripts/aiptrain_build.py PACKAGE_DIR CACHE_DIR

Calls `aiptrain._packaging.build_package` (an empty CACHE_DIR builds; a filled one is a cache
hit) and prints whether the archive came from the cache, so the row can check it did.
"""

import sys
from pathlib import Path

from aiptrain._packaging import build_package

built = build_package(Path(sys.argv[1]), cache_dir=Path(sys.argv[2]))
print("cache-hit" if built.reused_from_cache else "built", built.path)
