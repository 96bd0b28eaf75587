"""The aiptrain home: one reader of $AIPTRAIN_HOME, one layout, and nobody else spelling it."""

from __future__ import annotations

import ast
import stat
from pathlib import Path

import pytest

from aiptrain._paths import HomeLayout, aiptrain_home, serve_token_path

REPO = Path(__file__).resolve().parents[1]

# Where each part of a home has always been: existing homes hold these paths, so a renamed
# property may not move one.
LAYOUT = {
    "storage": "storage",
    "jobs": "jobs",
    "jobs_db": "jobs.db",
    "envs": "envs",
    "cache": "cache",
    "sdist_cache": "cache/sdist",
    "site_cache": "cache/site",
    "container_trust_cache": "cache/container-trust",
    "container_leftovers": "container-leftovers",
    "launching": "launching",
    "dispatch_lock": "dispatch.lock",
    "emulator": "emulator",
    "emulator_tokens": "emulator/tokens",
    "ray_runner_lock": "emulator/ray-runner.lock",
    "emulator_grpc": "emulator/grpc",
    "proxy_ca": "emulator/proxy-ca",
    "ca": "ca",
    "tmp": "tmp",
    "tools": "tools",
}

# The names of the parts under the home (first segments of LAYOUT), which nothing but paths.py
# joins to a home.
_PARTS = {relative.split("/")[0] for relative in LAYOUT.values()}


def test_every_part_of_the_layout_is_where_existing_homes_keep_it(tmp_path: Path) -> None:
    layout = HomeLayout(tmp_path)
    properties = {name for name, value in vars(HomeLayout).items() if isinstance(value, property)} - {"root"}
    assert properties == set(LAYOUT), "a new part of the home needs its row in LAYOUT"
    for name, relative in LAYOUT.items():
        assert getattr(layout, name) == tmp_path / relative, name


def test_layouts_compare_by_their_root(tmp_path: Path) -> None:
    assert HomeLayout(tmp_path) == HomeLayout(tmp_path) != HomeLayout(tmp_path / "other")
    assert len({HomeLayout(tmp_path), HomeLayout(tmp_path)}) == 1
    assert repr(HomeLayout(tmp_path)) == f"HomeLayout({tmp_path!r})"


def test_naming_a_part_creates_nothing(tmp_path: Path) -> None:
    layout = HomeLayout(tmp_path / "home")
    for name in LAYOUT:
        getattr(layout, name)
    assert not (tmp_path / "home").exists()


def test_the_layout_of_no_home_is_the_configured_one_created_private(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPTRAIN_HOME", str(tmp_path / "fresh"))
    assert HomeLayout.of().root == tmp_path / "fresh" == aiptrain_home()
    assert stat.S_IMODE((tmp_path / "fresh").stat().st_mode) == 0o700
    assert HomeLayout.of(tmp_path / "given").root == tmp_path / "given"


def test_an_empty_setting_means_the_default_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPTRAIN_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert aiptrain_home() == tmp_path / ".aiptrain"


def test_a_serve_token_lives_under_the_emulator_tokens(tmp_path: Path) -> None:
    assert serve_token_path(8080, tmp_path) == tmp_path / "emulator" / "tokens" / "8080"


def _python_files() -> list[Path]:
    return [path for path in sorted((REPO / "aiptrain").rglob("*.py")) if "data" not in path.relative_to(REPO).parts]


def _joins_a_home(node: ast.AST) -> bool:
    """`<something named home> / "<a part of the home>"`: home, self.home, aiptrain_home(), ..."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
        return False
    right = node.right
    return (isinstance(right, ast.Constant) and right.value in _PARTS
            and "home" in ast.unparse(node.left).lower() and "Path.home()" not in ast.unparse(node.left))


def test_only_the_layout_joins_a_part_to_the_home() -> None:
    found: dict[str, list[int]] = {}
    for path in _python_files():
        relative = str(path.relative_to(REPO))
        if relative == "aiptrain/_paths.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lines = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.BinOp) and _joins_a_home(node)]
        if lines:
            found[relative] = lines
    assert not found, f"use aiptrain._paths.HomeLayout instead: {found}"


def test_the_scan_finds_a_home_joined_by_hand() -> None:
    for source in ('home / "storage"', 'self.home / "cache" / "site"', 'aiptrain_home() / "jobs"'):
        assert any(_joins_a_home(node) for node in ast.walk(ast.parse(source))), source
    for source in ('Path.home() / ".config"', 'root / "storage"', 'home / "README"'):
        assert not any(_joins_a_home(node) for node in ast.walk(ast.parse(source))), source


def _reads_the_home_setting(node: ast.AST) -> bool:
    """`os.environ.get("AIPTRAIN_HOME", ...)`, `os.getenv(...)` or `os.environ["AIPTRAIN_HOME"]` (read)."""
    if isinstance(node, ast.Call) and node.args:
        name = ast.unparse(node.func)
        first = node.args[0]
        return (name.endswith(("environ.get", "getenv")) and isinstance(first, ast.Constant)
                and first.value == "AIPTRAIN_HOME")
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        key = node.slice
        return (ast.unparse(node.value).endswith("environ") and isinstance(key, ast.Constant)
                and key.value == "AIPTRAIN_HOME")
    return False


def test_only_aiptrain_home_reads_the_setting() -> None:
    readers = set()
    for path in _python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(_reads_the_home_setting(node) for node in ast.walk(tree)):
            readers.add(str(path.relative_to(REPO)))
    assert readers == {"aiptrain/_paths.py"}
    assert _reads_the_home_setting(ast.parse('os.environ.get("AIPTRAIN_HOME", "~")').body[0].value)  # type: ignore[attr-defined]
    assert not _reads_the_home_setting(ast.parse('env["AIPTRAIN_HOME"] = "x"').body[0].targets[0])  # type: ignore[attr-defined]
