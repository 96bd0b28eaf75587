"""The folders of aiptrain/ are layers: each imports only what its `__init__.py` says it may.

`ALLOWED` and `EXCEPTIONS` below are the one rule table: every package's docstring states its
layer's line ("May import: `a`, `b`."), and ARCHITECTURE.md's where it states one, and both are
checked against the table here. ruff's banned-api holds the third-party boundaries (click, ray,
googleapiclient, sqlite3); this test holds the ones between aiptrain's own folders: what each
imports, which files it loads by path, that only `replicas/containers/` runs a container
engine's programs, that generic code never compares a backend's name, and that the code a Ray
node runs loads without the local backend's SQLite store.
"""

from __future__ import annotations

import ast
import functools
import re
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
    "tuning": _BASE | {"job", "replicas", "environments"},
    "submit": _BASE | {"job", "packaging", "storage", "backends"},
    "backends": _BASE | {"job", *(f"backends.{name}" for name in BACKEND_FOLDERS)},
    "backends.mlv1": _BASE | {"job", "backends"},
    "backends.vertex": _BASE | {"job", "tuning", "backends", "backends.mlv1"},
    "backends.ray": _BASE | {"job", "replicas", "environments", "tuning", "storage", "backends"},
    "backends.local": _BASE | {"job", "replicas", "environments", "gcs_endpoint", "tuning", "storage",
                       "backends"},
    "api": _BASE | {"job", "packaging", "storage", "environments", "submit", "backends"},
    "emulator": _BASE | {"job", "replicas", "environments", "gcs_endpoint", "tuning", "storage", "submit",
                         "backends", "backends.local", "backends.ray",
                         "backends.vertex"},
}
# Single modules a layer may use across its line, each with the reason.
EXCEPTIONS: dict[str, set[str]] = {
    # Every dry-run shows the Vertex AI body the job becomes; the translation is pure.
    "submit": {"aiptrain._backends.vertex.study"},
}


# The layers that may import every other one (and that nothing imports): their statement is "every layer".
TOP_LAYERS = {"cli"}
STATEMENT = re.compile(r"(?:^|(?<=\s))May import: (.*?)\.(?=\s|$)", re.DOTALL)


def layer_of(module: str) -> str:
    """`aiptrain._backends.local.store` -> "backends.local": layers are named without the leading
    underscore that marks every internal package (docs/contributing.md)."""
    parts = module.split(".")[1:]
    if not parts:
        return ""
    parts[0] = parts[0].removeprefix("_")
    if parts[0] == "backends" and len(parts) > 2 and parts[1] in BACKEND_FOLDERS:
        return f"backends.{parts[1]}"
    return parts[0]


def layer_of_folder(folder: str) -> str:
    """`backends/local/` -> "backends.local", `replicas/containers` -> "replicas"."""
    return layer_of(".".join(["aiptrain", *folder.strip("/").split("/"), "module"]))


def folder_of(path: Path) -> Path:
    """aiptrain/_backends/local/store.py -> backends/local/store.py: a file's place as the rule
    table, the docstrings and ARCHITECTURE.md name it (without the internal packages' underscore)."""
    relative = path.relative_to(PACKAGE)
    return Path(relative.parts[0].removeprefix("_"), *relative.parts[1:])


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
    assert layer_of("aiptrain._backends.local.store") == "backends.local"
    assert "backends.local" not in ALLOWED["replicas"]
    assert layer_of("aiptrain._replicas.replica_set") == "replicas"


def stated_imports(text: str) -> set[str] | None:
    """The names a "May import: `a`, `b` and `c`." sentence lists (backticked, up to its first
    period outside backticks); {"every layer"} for "May import: every layer."; None without one."""
    unquoted = re.sub(r"`[^`]*`", lambda quoted: quoted.group().replace(".", "\0"), text)
    found = STATEMENT.search(unquoted)
    if found is None:
        return None
    sentence = found.group(1).replace("\0", ".")
    return set(re.findall(r"`([^`]+)`", sentence)) or {sentence.strip()}


def rule_of(layer: str) -> set[str]:
    """What the table lets `layer` import, as a statement lists it."""
    if layer in TOP_LAYERS:
        return {"every layer"}
    return ALLOWED[layer] | {module.removeprefix("aiptrain._") for module in EXCEPTIONS.get(layer, set())}


def package_folders() -> list[Path]:
    """Every package of aiptrain/ but the shipped data, aiptrain/ itself first."""
    return sorted(path.parent for path in PACKAGE.rglob("__init__.py")
                  if "data" not in path.relative_to(PACKAGE).parts)


def test_every_package_states_its_layers_rule_as_the_table_has_it() -> None:
    wrong = []
    for folder in package_folders():
        if folder == PACKAGE:
            continue
        module = module_of(folder / "__init__.py")
        layer = layer_of_folder(folder_of(folder).as_posix())
        docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
        stated = stated_imports(docstring)
        if stated is None:
            wrong.append(f"{module}: no 'May import: ...' sentence")
        elif stated - {layer} != rule_of(layer):
            wrong.append(f"{module} states {sorted(stated)}, the table {sorted(rule_of(layer))}")
    assert wrong == []


def test_the_statements_parse_as_written() -> None:
    assert stated_imports("X.\n\nMay import: `errors`, `job.spec` and `backends`. Never `cli`.") == {
        "errors", "job.spec", "backends"}
    assert stated_imports("May import: every layer. Nothing imports it.") == {"every layer"}
    assert stated_imports("It may import `job`.") is None
    assert rule_of("submit") >= {"job", "backends.vertex.study"}
    assert layer_of_folder("backends/local/") == "backends.local"
    assert layer_of_folder("replicas/containers") == "replicas"


def _folder_paragraphs() -> dict[str, str]:
    from tests.test_architecture import folder_paragraphs

    return folder_paragraphs()


def test_architecture_md_states_the_rules_the_table_has() -> None:
    wrong = []
    for folder, paragraph in _folder_paragraphs().items():
        stated = stated_imports(paragraph)
        layer = layer_of_folder(folder)
        if stated is not None and stated - {layer} != rule_of(layer):
            wrong.append(f"ARCHITECTURE.md's {folder} states {sorted(stated)}, the table {sorted(rule_of(layer))}")
    assert wrong == []


BACKEND_NAMES = ("local", "ray", "vertex", "mlv1")
# What holds a backend's name where generic code could compare it.
_NAME_HOLDERS = {"backend", "backend_name", "name"}


def _holds_a_name(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in _NAME_HOLDERS
    return isinstance(node, ast.Attribute) and node.attr in _NAME_HOLDERS


def _names_a_backend(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in BACKEND_NAMES
    return isinstance(node, ast.Tuple | ast.List | ast.Set) and any(_names_a_backend(item) for item in node.elts)


def backend_name_comparisons(source: str) -> list[str]:
    """`x.backend == "vertex"`, `backend_name != "local"`, `self.name in ("ray", "local")` ...:
    each comparison of something holding a backend's name with a backend's name."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_holds_a_name(side) for side in sides) and any(_names_a_backend(side) for side in sides):
                found.append((node.lineno, ast.unparse(node)))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def test_no_module_except_cli_and_the_backends_names_a_backend() -> None:
    """Generic code asks the backend what it can do, or reads the job's own facts; it never
    compares a backend's name."""
    named = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = folder_of(path)
        if relative.parts[0] in ("backends", "cli", "data"):
            continue
        named += [f"{relative} {comparison}" for comparison in backend_name_comparisons(path.read_text())]
    assert named == []


def test_the_backend_name_check_sees_every_form() -> None:
    source = """
pool = vertex_task_name(task) if view.backend == "vertex" else task
if backend_name != "local": pass
if "ray" == self.name: pass
if settings.backend in ("ray", "local"): pass
if store.kind == "local": pass
"""
    assert [found.split(":")[0] for found in backend_name_comparisons(source)] == [
        "line 2", "line 3", "line 4", "line 5"]


# Calls that start a program, and the container engines' programs.
_SPAWNERS = {"run", "Popen", "check_output", "check_call", "call", "which", "create_subprocess_exec",
             "execv", "execvp", "execvpe", "execve", "spawnv", "spawnvp"}
ENGINE_PROGRAMS = ("docker", "podman")
CONTAINER_ENGINE_FOLDER = "replicas/containers"


def engine_program_uses(source: str) -> list[str]:
    """Where `source` names a container engine's program ("docker", "podman") or starts a
    program from an `Engine`'s `binary`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and node.value in ENGINE_PROGRAMS:
            found.append((node.lineno, f"names {node.value!r}"))
        elif isinstance(node, ast.Call):
            function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if function in _SPAWNERS and any(isinstance(inner, ast.Attribute) and inner.attr == "binary"
                                             for argument in node.args for inner in ast.walk(argument)):
                found.append((node.lineno, "starts an engine's binary"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def test_only_the_containers_folder_runs_a_container_engine() -> None:
    """Backends and the rest of the replica core ask `replicas/containers/` for container replicas;
    they never run Docker or Podman themselves."""
    running = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = folder_of(path)
        if relative.parts[0] == "data" or relative.as_posix().startswith(CONTAINER_ENGINE_FOLDER + "/"):
            continue
        running += [f"{relative} {use}" for use in engine_program_uses(path.read_text())]
    assert running == []


def test_the_engine_check_sees_a_program_started() -> None:
    source = """
subprocess.run(["docker", "ps"])
subprocess.run([engine.binary, "rm", "-f", name])
shutil.which("podman")
"""
    assert [use.split(":")[0] for use in engine_program_uses(source)] == ["line 2", "line 3", "line 4"]
    assert engine_program_uses('image = "us-docker.pkg.dev/x"\nsay(engine.binary)\n') == []


@functools.cache
def module_file_names() -> frozenset[str]:
    """`processes.py`, `system_trust.py` ...: the file names of aiptrain's modules. Every package has
    an `__init__.py`: that name is the trainer's, never a file of aiptrain's."""
    return frozenset(found.name for found in PACKAGE.rglob("*.py")
                     if "data" not in found.relative_to(PACKAGE).parts) - {"__init__.py"}


def path_loads(path: Path, source: str) -> list[str]:
    """Each aiptrain source file `source` (the text of `path`) names by path that is not beside
    it: a file loaded by path (`spec_from_file_location`, `runpy.run_path`, a script started by
    its file) escapes the import checks, so it may only be one of its own folder."""
    modules = module_file_names()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        named = re.fullmatch(r"[\w./-]*?([\w-]+\.py)", node.value)
        if named and named.group(1) in modules and (node.value != named.group(1)
                                                    or not (path.parent / named.group(1)).is_file()):
            found.append(f"line {node.lineno}: {node.value!r}")
    return found


def test_nothing_loads_a_file_of_another_folder_by_path() -> None:
    loading = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "data" not in path.relative_to(PACKAGE).parts:
            loading += [f"{path.relative_to(PACKAGE)} {load}" for load in path_loads(path, path.read_text())]
    assert loading == []


def test_the_path_check_sees_a_file_of_another_folder() -> None:
    beside = PACKAGE / "_replicas" / "_die_with_parent.py"
    crossing = 'spec_from_file_location("system_trust", os.path.join(package, "gcs_endpoint", "metadata.py"))\n'
    assert path_loads(beside, crossing) == ["line 1: 'metadata.py'"]
    assert path_loads(beside, 'runpy.run_path("gcs_endpoint/metadata.py")\n') == [
        "line 1: 'gcs_endpoint/metadata.py'"]
    assert path_loads(beside, 'spec_from_file_location("x", here / "system_trust.py")\n') == []


_BLOCKING_FINDER = """
import sys

class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name in ("sqlite3", "_sqlite3") or name.startswith("aiptrain._backends.local"):
            raise ImportError(f"{name} is blocked: a Ray node must not need it")
        return None

sys.meta_path.insert(0, Blocked())
"""


@pytest.mark.parametrize("module", [
    "aiptrain._backends.ray.backend",
    "aiptrain._backends.ray.driver",
    "aiptrain._backends.ray.replica_host",
    "aiptrain._backends.ray.tuning_host",
    "aiptrain._replicas.replica_set",
    "aiptrain._environments.preparation",
    "aiptrain._tuning.tuning_run",
])
def test_what_a_ray_node_runs_imports_without_the_sqlite_store(module: str) -> None:
    code = _BLOCKING_FINDER + f"import {module}\nprint('imported')\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "imported"


def test_the_blocking_finder_really_blocks() -> None:
    code = _BLOCKING_FINDER + "import aiptrain._backends.local.store\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode != 0
    assert "blocked" in done.stderr
