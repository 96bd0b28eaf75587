"""How the evaluator task decides that waiting for another checkpoint is pointless."""

from __future__ import annotations

import json


def _write_checkpoint_state(checkpoint_dir, step):
    (checkpoint_dir / f"ckpt-{step}.index").write_bytes(b"")
    (checkpoint_dir / "checkpoint").write_text(
        f'model_checkpoint_path: "ckpt-{step}"\nall_model_checkpoint_paths: "ckpt-{step}"\n'
    )
    return str(checkpoint_dir / f"ckpt-{step}")


def test_marker_ends_the_wait_only_after_the_final_checkpoint_was_evaluated(template_module, tmp_path):
    evaluator_task = template_module("evaluator_task")
    marker = tmp_path / "TRAINING_COMPLETE"
    watch = evaluator_task._FinishWatch(str(tmp_path), str(marker), idle_timeout_secs=3600)

    evaluated = _write_checkpoint_state(tmp_path, 40)
    watch.last_evaluated = evaluated
    assert not watch(), "no marker yet: training is still running"

    marker.write_text(json.dumps({"final_step": 60}))
    latest = _write_checkpoint_state(tmp_path, 60)
    assert not watch(), "the final checkpoint exists but has not been evaluated"

    watch.last_evaluated = latest
    assert watch()
    assert "finished at step 60" in watch.reason


def test_idle_timeout_ends_the_wait(template_module, tmp_path):
    evaluator_task = template_module("evaluator_task")
    watch = evaluator_task._FinishWatch(str(tmp_path), str(tmp_path / "TRAINING_COMPLETE"), idle_timeout_secs=0)
    watch.last_activity -= 1
    assert watch()
    assert "no new checkpoint" in watch.reason


def test_completion_marker_round_trip(template_module, tmp_path):
    checkpoints = template_module("checkpoints")
    marker = str(tmp_path / "TRAINING_COMPLETE")
    assert checkpoints.read_completion_marker(marker) is None
    checkpoints.write_completion_marker(marker, 120)
    assert checkpoints.read_completion_marker(marker) == 120
    checkpoints.clear_completion_marker(marker)
    assert checkpoints.read_completion_marker(marker) is None
    assert checkpoints.checkpoint_step("/jobs/j/checkpoints/ckpt-75") == 75
