"""The submit pipeline as a library: `submission.submit` and `submission.dry_run_document`, no click."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROJECT_DIR = REPO / "tests" / "fixtures" / "projects" / "with_setup_py"

# Runs in a fresh interpreter so that sys.modules shows what the pipeline itself imports.
SCRIPT = """
import json, sys
from pathlib import Path
from aiptrain._backends import get_backend
from aiptrain._backends.base import BackendSettings
from aiptrain._job.catalog import load_catalog
from aiptrain.errors import ValidationFailed
from aiptrain._storage import open_store
from aiptrain._submit.submission import SubmitOptions, dry_run_document, submit

package = Path(sys.argv[1])
backend = get_backend("local", BackendSettings(project="ci"))
store = open_store("local")
common = dict(backend=backend, catalog=load_catalog(), store=store, project="ci")
options = SubmitOptions(job_id="ci_job", package_path=package, module_name="trainer.task",
                        region="us-central1", runtime_version="2.11", scale_tier="CUSTOM",
                        master_machine_type="n1-standard-4", worker_machine_type="n1-standard-4",
                        worker_count=1, user_args=["--epochs", "1"])
dry = dry_run_document(options, **common)
try:
    submit(SubmitOptions(job_id="1bad", package_path=package, module_name="trainer.task"), **common)
    refused = None
except ValidationFailed as failed:
    refused = [p.path for p in failed.problems]
nothing = {"jobs": [job.job_id for job in backend.list_jobs()], "staged": list(Path(store.root).rglob("*.tar.gz"))}
uploads = []
created = submit(options, **common, on_upload=uploads.append)
backend.cancel_job("ci_job")
print(json.dumps({"document": dry.document, "refused": refused, "before": repr(nothing),
                  "created": created.job_id, "state": str(created.state),
                  "uploads": [(u.action, u.uri) for u in uploads],
                  "click": "click" in sys.modules}))
"""


def test_dry_run_and_submit_need_no_command_line(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(PROJECT_DIR / "trainer")], capture_output=True,
                         text=True, cwd=tmp_path, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.splitlines()[-1])
    document = result["document"]
    assert document["dryRun"] is True and document["backend"] == "local"
    assert document["request"]["jobId"] == "ci_job"
    assert document["request"]["trainingInput"]["args"] == ["--epochs", "1"]
    assert [(g["taskType"], g["count"]) for g in document["cluster"]] == [("chief", 1), ("worker", 1)]
    assert set(document["tfConfig"]) == {"master-replica-0", "worker-replica-0"}
    assert "customJob" in document["vertex"]
    # A bad job ID is refused before anything is uploaded or created.
    assert result["refused"] == ["jobId", "trainingInput.region"]
    assert result["before"] == repr({"jobs": [], "staged": []})
    # A good one is built, staged and created.
    assert result["created"] == "ci_job" and result["state"] in {"QUEUED", "PREPARING", "RUNNING"}
    [(action, uri)] = result["uploads"]
    assert action == "uploaded" and uri.endswith(".tar.gz") and uri.startswith("gs://")
    assert uri == document["uploads"][0]["target"]
    assert result["click"] is False
