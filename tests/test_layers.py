"""The folders of aiptrain/ are layers: each imports only what its `__init__.py` says it may.

ruff's banned-api holds the third-party boundaries (click, ray, googleapiclient, sqlite3); this
test holds the ones between aiptrain's own folders, and checks that the code a Ray node runs
loads without the local backend's SQLite store.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "aiptrain"
BACKEND_FOLDERS = ("local", "ray", "vertex", "mlv1")

# layer -> the other layers it may import. A layer is a top-level folder (or loose module) of
# aiptrain/, and each backend's own folder is a layer of its own ("backends" is the protocol,
# the registry and the poll pacing directly in backends/).
_BASE = {"errors", "paths", "cache_eviction", "loopback"}
ALLOWED: dict[str, set[str]] = {
    "job": {"errors"},
    "packaging": _BASE,
    "storage": _BASE,
    "replicas": _BASE | {"job", "storage"},
    "environments": _BASE | {"job", "storage", "replicas"},
    "gcs_endpoint": _BASE | {"job", "storage", "replicas"},
    "tuning": _BASE | {"job", "replicas", "environments", "gcs_endpoint"},
    "submit": _BASE | {"job", "packaging", "storage", "backends"},
    "backends": _BASE | {"job", *(f"backends.{name}" for name in BACKEND_FOLDERS)},
    "backends.mlv1": _BASE | {"job", "backends"},
    "backends.vertex": _BASE | {"job", "tuning", "backends", "backends.mlv1"},
    "backends.ray": _BASE | {"job", "replicas", "environments", "tuning", "storage", "backends"},
    "backends.local": _BASE | {"job", "replicas", "environments", "gcs_endpoint", "tuning", "storage",
                       "backends"},
    "api": _BASE | {"job", "packaging", "storage", "environments", "submit", "backends"},
    "emulator": _BASE | {"job", "replicas", "environments", "gcs_endpoint", "tuning", "storage", "submit",
                         "backends", "backends.local",
                         "backends.vertex"},
}
# Single modules a layer may use across its line, each with the reason.
EXCEPTIONS: dict[str, set[str]] = {
    # Every dry-run shows the Vertex AI body the job becomes; the translation is pure.
    "submit": {"aiptrain.backends.vertex.study"},
}


def layer_of(module: str) -> str:
    parts = module.split(".")[1:]
    if not parts:
        return ""
    if parts[0] == "backends" and len(parts) > 2 and parts[1] in BACKEND_FOLDERS:
        return f"backends.{parts[1]}"
    return parts[0]


def module_of(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def aiptrain_imports(path: Path) -> set[str]:
    """Every aiptrain module a file imports, at module level, in functions or for type checking."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("aiptrain"):
            found.update(f"{node.module}.{alias.name}" if node.module == "aiptrain" else node.module
                         for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("aiptrain."))
    return found


def crossings() -> list[str]:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "data" in path.relative_to(PACKAGE).parts:
            continue
        module = module_of(path)
        layer = layer_of(module)
        if layer not in ALLOWED:
            continue  # cli/ may import every layer; loose modules import `errors` at most
        for imported in sorted(aiptrain_imports(path)):
            other = layer_of(imported)
            if other in ("", layer) or other in ALLOWED[layer] or imported in EXCEPTIONS.get(layer, set()):
                continue
            wrong.append(f"{module} imports {imported} ({layer} -> {other})")
    return wrong


def test_every_folder_imports_only_the_layers_it_may() -> None:
    assert crossings() == []


def test_the_check_sees_a_crossing() -> None:
    # The shared replica core importing the local store is exactly what must be caught.
    assert layer_of("aiptrain.backends.local.store") == "backends.local"
    assert "backends.local" not in ALLOWED["replicas"]
    assert layer_of("aiptrain.replicas.replica_set") == "replicas"


def test_no_module_except_cli_and_the_local_backend_names_a_backend() -> None:
    """Generic code asks the backend what it can do; it never compares the backend's name."""
    named = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in ("backends", "cli", "data"):
            continue
        text = path.read_text()
        for name in ("local", "ray", "vertex", "mlv1"):
            if f'backend_name == "{name}"' in text or f'.name == "{name}"' in text:
                named.append(f"{relative} compares a backend's name with {name!r}")
    assert named == []


_BLOCKING_FINDER = """
import sys

class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name in ("sqlite3", "_sqlite3") or name.startswith("aiptrain.backends.local"):
            raise ImportError(f"{name} is blocked: a Ray node must not need it")
        return None

sys.meta_path.insert(0, Blocked())
"""


@pytest.mark.parametrize("module", [
    "aiptrain.backends.ray.backend",
    "aiptrain.backends.ray.driver",
    "aiptrain.backends.ray.replica_host",
    "aiptrain.backends.ray.tuning_host",
    "aiptrain.replicas.replica_set",
    "aiptrain.environments.preparation",
    "aiptrain.tuning.job",
])
def test_what_a_ray_node_runs_imports_without_the_sqlite_store(module: str) -> None:
    code = _BLOCKING_FINDER + f"import {module}\nprint('imported')\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "imported"


def test_the_blocking_finder_really_blocks() -> None:
    code = _BLOCKING_FINDER + "import aiptrain.backends.local.store\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode != 0
    assert "blocked" in done.stderr
