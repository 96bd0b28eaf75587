"""tests/ mirrors aiptrain/: whoever changes `aiptrain/X/` finds what guards it in `tests/X/`.

- Every package of aiptrain/ (a folder with an `__init__.py`, but the data shipped in aiptrain/data)
  has its tests folder at the same place, without the leading underscore that marks aiptrain's
  internal packages: `aiptrain/_job/` -> `tests/job/`, `aiptrain/_backends/ray/` -> `tests/backends/ray/`.
- Every folder of tests/ names a package of aiptrain/, or is one of the folders that guard no single
  package (`NOT_A_PACKAGE`); inside a layer's folder, the folders of a package that has packages of
  its own (tests/backends/) name those. Other folders inside a layer's folder are its data
  (trainers/).
- Every folder holding test modules or a conftest.py is a Python package, up to tests/ itself: test
  modules are imported as `tests.<folder>.<module>`, so two `test_local_train.py` never collide.

Test modules directly in tests/ guard the whole package (its layers, its import graph, this layout)
or a module at aiptrain/'s top (errors.py, paths.py, cache_eviction.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

NOT_A_PACKAGE = {
    "e2e": "the suites that cross every layer: the template's jobs, gcloud, Google's clients, hardening, fuzz",
    "fixtures": "fixtures, harnesses and test trainers shared by several folders",
    "bench": "the benchmark harness of bench/",
    "docs": "the manual in docs/",
}
NOT_TESTED_AS_A_PACKAGE = {"data"}  # the trainer template and the catalogs, shipped as data
IGNORED = {"__pycache__"}


def packages(package_root: Path) -> set[Path]:
    """The packages under `package_root`, relative to it (the root itself left out)."""
    found = {mirrored(path.parent.relative_to(package_root)) for path in package_root.rglob("__init__.py")}
    return {path for path in found
            if path != Path(".") and path.parts[0] not in NOT_TESTED_AS_A_PACKAGE and IGNORED.isdisjoint(path.parts)}


def mirrored(relative: Path) -> Path:
    """`_backends/local` -> `backends/local`: an internal package's tests drop its leading underscore
    (tests/backends/local/ guards aiptrain/_backends/local/)."""
    if relative == Path("."):
        return relative
    return Path(relative.parts[0].removeprefix("_"), *relative.parts[1:])


def subfolders(directory: Path) -> list[Path]:
    return sorted(path for path in directory.iterdir() if path.is_dir() and path.name not in IGNORED)


def layout_problems(package_root: Path, tests_root: Path) -> list[str]:
    """What breaks the mirror between `package_root` (aiptrain/) and `tests_root` (tests/)."""
    package = package_root.name
    layers = packages(package_root)
    problems = [f"{package}/{layer.as_posix()}/ has no tests/{layer.as_posix()}/"
                for layer in sorted(layers) if not (tests_root / layer).is_dir()]
    for folder in subfolders(tests_root):
        if folder.name not in NOT_A_PACKAGE and Path(folder.name) not in layers:
            problems.append(f"tests/{folder.name}/ names no package of {package}/ "
                            f"(nor is it one of {', '.join(sorted(NOT_A_PACKAGE))})")
    for layer in sorted(layers):
        inner = {path for path in layers if path.parent == layer}
        if not inner or not (tests_root / layer).is_dir():
            continue
        for folder in subfolders(tests_root / layer):
            if folder.relative_to(tests_root) not in inner:
                problems.append(f"tests/{folder.relative_to(tests_root).as_posix()}/ names no package "
                                f"of {package}/{layer.as_posix()}/")
    return problems + package_problems(tests_root)


def package_problems(tests_root: Path) -> list[str]:
    """Folders with test modules or a conftest.py that are not packages, up to tests/."""
    holders = {path.parent for pattern in ("test_*.py", "conftest.py") for path in tests_root.rglob(pattern)
               if IGNORED.isdisjoint(path.parts)}
    needed = holders | {parent for folder in holders for parent in folder.parents
                        if parent.is_relative_to(tests_root)}
    return [f"{shown(folder, tests_root)} holds tests but has no __init__.py"
            for folder in sorted(needed) if not (folder / "__init__.py").is_file()]


def shown(folder: Path, tests_root: Path) -> str:
    return "/".join(("tests", *folder.relative_to(tests_root).parts, ""))


def test_tests_mirror_the_packages_of_aiptrain() -> None:
    assert layout_problems(REPO / "aiptrain", REPO / "tests") == []


def make_tree(root: Path, files: list[str]) -> None:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")


MIRRORED_PACKAGE = ["pkg/__init__.py", "pkg/job/__init__.py", "pkg/data/template/trainer/__init__.py",
                    "pkg/backends/__init__.py", "pkg/backends/local/__init__.py", "pkg/errors.py"]
MIRRORED_TESTS = ["tests/__init__.py", "tests/conftest.py", "tests/test_errors.py",
                  "tests/job/__init__.py", "tests/job/test_spec.py", "tests/job/trainers/tf/task.py",
                  "tests/backends/__init__.py", "tests/backends/local/__init__.py",
                  "tests/backends/local/test_engine.py", "tests/e2e/__init__.py", "tests/e2e/fuzz/__init__.py",
                  "tests/e2e/fuzz/test_properties.py", "tests/fixtures/__init__.py", "tests/fixtures/gcs.py"]


@pytest.mark.parametrize(("extra", "missing", "expected"), [
    ([], [], []),
    (["pkg/submit/__init__.py"], [], ["pkg/submit/ has no tests/submit/"]),
    (["pkg/backends/ray/__init__.py"], [], ["pkg/backends/ray/ has no tests/backends/ray/"]),
    (["tests/unit/__init__.py", "tests/unit/test_spec.py"], [],
     ["tests/unit/ names no package of pkg/ (nor is it one of bench, docs, e2e, fixtures)"]),
    (["tests/backends/rest/__init__.py", "tests/backends/rest/test_client.py"], [],
     ["tests/backends/rest/ names no package of pkg/backends/"]),
    (["tests/data/__init__.py"], [],
     ["tests/data/ names no package of pkg/ (nor is it one of bench, docs, e2e, fixtures)"]),
    ([], ["tests/job/__init__.py"], ["tests/job/ holds tests but has no __init__.py"]),
    ([], ["tests/backends/__init__.py"], ["tests/backends/ holds tests but has no __init__.py"]),
    ([], ["tests/__init__.py"], ["tests/ holds tests but has no __init__.py"]),
    (["tests/docs/__init__.py", "tests/docs/test_manual.py"], [], []),
])
def test_the_layout_check_finds_what_breaks_the_mirror(tmp_path: Path, extra: list[str], missing: list[str],
                                                        expected: list[str]) -> None:
    make_tree(tmp_path, [name for name in MIRRORED_PACKAGE + MIRRORED_TESTS + extra if name not in missing])
    assert layout_problems(tmp_path / "pkg", tmp_path / "tests") == expected
