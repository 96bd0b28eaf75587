"""A submit's hold on a staged object of the local store: a delete leaves a held object, takes
one nobody holds, and a hold on an object deleted or replaced since is refused (to stage it again)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from aiptrain._storage.object_references import ObjectReferences, delete_unless_held


def _object(tmp_path: Path, text: str = "package bytes") -> Path:
    path = tmp_path / "bucket" / "pkg.tar.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_held_object_is_not_deleted_until_released(tmp_path: Path) -> None:
    path = _object(tmp_path)
    with ObjectReferences() as references:
        assert references.hold(path)
        assert not delete_unless_held(path)
        assert path.read_text() == "package bytes"
    assert delete_unless_held(path)
    assert not path.exists()


def test_a_hold_in_another_process_keeps_the_object(tmp_path: Path) -> None:
    path = _object(tmp_path)
    script = ("import sys\nfrom pathlib import Path\nfrom aiptrain._storage.object_references import ObjectReferences\n"
              "references = ObjectReferences()\nprint(references.hold(Path(sys.argv[1])), flush=True)\n"
              "sys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", script, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "True"
        assert not delete_unless_held(path)
    finally:
        holder.communicate("", timeout=60)
    assert delete_unless_held(path) and not path.exists()


def test_an_object_deleted_or_replaced_cannot_be_held(tmp_path: Path) -> None:
    path = _object(tmp_path)
    assert delete_unless_held(path)
    references = ObjectReferences()
    assert not references.hold(path)
    replaced = _object(tmp_path, "staged again")
    assert references.hold(replaced)
    references.close()
    assert delete_unless_held(replaced)


def test_deleting_what_is_gone_is_done(tmp_path: Path) -> None:
    assert delete_unless_held(tmp_path / "never-there")
