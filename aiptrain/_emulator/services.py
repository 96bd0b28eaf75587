"""What every emulator handler works with: the engine, the stores and the request validators."""

from __future__ import annotations

import base64
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiptrain._emulator.discovery import discovery_document
from aiptrain._emulator.errors import ApiError, invalid_argument
from aiptrain._emulator.projects import ProjectDirectory
from aiptrain._emulator.schema import SchemaValidator, Violation
from aiptrain._emulator.vertex_jobs import VertexJobRecord, VertexJobStore, vertex_job_name
from aiptrain._paths import HomeLayout

if TYPE_CHECKING:
    from aiptrain._backends.local.job_engine import LocalJobEngine
    from aiptrain._job.spec import Job


@dataclass(frozen=True)
class Services:
    engine: LocalJobEngine
    storage_root: Path
    custom_jobs: VertexJobStore
    tuning_jobs: VertexJobStore
    projects: ProjectDirectory
    training_pipelines: VertexJobStore

    def vertex_name(self, record: VertexJobRecord) -> str:
        """The job's resource name as Vertex AI returns it: with the project number."""
        number = self.projects.number(record.project)
        return vertex_job_name(number, record.location, record.collection, record.numeric_id)

    def vertex_job_by_numeric_id(self, numeric_id: str) -> VertexJobRecord | None:
        """The custom or tuning job with this numeric ID (random 19-digit numbers: never shared in practice)."""
        return self.custom_jobs.by_numeric_id(numeric_id) or self.tuning_jobs.by_numeric_id(numeric_id)

    def submit(self, project: str, job: Job, *, vertex_job_id: str | None = None, check_job: bool = True) -> Job:
        """Start `job` on the engine once it passes what the CLI checks (`admission`); a
        ValidationFailed naming each problem otherwise, and nothing is created."""
        from aiptrain._emulator.admission import admission_refusal

        refusal = admission_refusal(job, self.storage_root, check_job=check_job, runner=self.engine.runner)
        if refusal is not None:
            raise refusal
        return self.engine.submit(project, job, vertex_job_id=vertex_job_id)

    def validated(self, api: str, version: str, body: Any, schema_id: str, root: str) -> dict[str, Any]:
        """The body checked against the API's schema, camelCase keys; 400 on any violation."""
        if not isinstance(body, dict):
            raise invalid_argument([Violation(root, "Invalid JSON payload received. Expected an object.")])
        cleaned, violations = _validator(api, version).validate(body, schema_id, root)
        if violations:
            raise invalid_argument(violations)
        assert isinstance(cleaned, dict)
        return cleaned


    def answer(self, result: dict[str, Any], schema_id: str | None, query: dict[str, str]) -> dict[str, Any]:
        """A Vertex response as the client asked for it: enums as numbers with
        `$alt=json;enum-encoding=int` (the Vertex AI SDK's REST transport), as names otherwise."""
        if schema_id is None or not wants_int_enums(query):
            return result
        numbered: dict[str, Any] = _validator("aiplatform", "v1").numbered_enums(result, schema_id)
        return numbered


def make_services(engine: LocalJobEngine, *, storage_root: Path | None = None,
                  state_dir: Path | None = None) -> Services:
    """The services over `engine`: `gs://` under `storage_root` (default: the engine home's
    `storage`, the local store), Vertex records under `state_dir` (default: its `emulator`)."""
    from aiptrain._emulator.vertex_jobs import CUSTOM_JOBS, TRAINING_PIPELINES, TUNING_JOBS

    home = _engine_home(engine)
    records = state_dir or HomeLayout(home).emulator
    return Services(
        engine=engine,
        storage_root=storage_root or HomeLayout(home).storage,
        custom_jobs=VertexJobStore(records / "custom_jobs", CUSTOM_JOBS),
        tuning_jobs=VertexJobStore(records / "hyperparameter_tuning_jobs", TUNING_JOBS),
        projects=ProjectDirectory(records / "projects.json"),
        training_pipelines=VertexJobStore(records / "training_pipelines", TRAINING_PIPELINES),
    )


def _engine_home(engine: Any) -> Path:
    home = getattr(engine, "home", None)
    if isinstance(home, Path):
        return home
    from aiptrain._paths import aiptrain_home

    return aiptrain_home()


def wants_int_enums(query: dict[str, str]) -> bool:
    options = [part.strip() for part in query.get("$alt", "").split(";")]
    return "enum-encoding=int" in options


@functools.cache
def _validator(api: str, version: str) -> SchemaValidator:
    numbers = enum_numbers() if (api, version) == ("aiplatform", "v1") else None
    return SchemaValidator(discovery_document(api, version), numbers)


def enum_numbers() -> dict[str, dict[str, int]]:
    """The proto numbers of the aiplatform v1 enums the emulator's resources use
    (written by scripts/vertex_enum_numbers.py from the SDK's descriptors)."""
    from importlib import resources

    text = resources.files("aiptrain").joinpath("data/aiplatform_v1_enums.json").read_text(encoding="utf-8")
    table: dict[str, dict[str, int]] = json.loads(text)
    return table


INT32_MAX = 2**31 - 1


def page_size(query: dict[str, str], *, default: int, maximum: int) -> int:
    raw = query.get("pageSize")
    if raw is None or raw == "":
        return default
    try:
        size = int(raw) if len(raw) <= 11 else INT32_MAX + 1  # the API's pageSize is an int32
    except ValueError:
        raise invalid_argument([Violation("page_size", f"Invalid value {raw[:40]!r}: expected an integer.")]) from None
    if size > INT32_MAX:
        raise invalid_argument([Violation("page_size", f"Invalid value {raw[:40]!r}: out of range for an int32 "
                                          f"(at most {INT32_MAX}).")])
    if size < 0:
        raise invalid_argument([Violation("page_size", "page_size must not be negative.")])
    return min(size or default, maximum)


def encode_token(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, sort_keys=True).encode()).decode().rstrip("=")


def decode_token(token: str, field: str = "page_token") -> dict[str, Any]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, TypeError):
        data = None
    if not isinstance(data, dict):
        raise ApiError("INVALID_ARGUMENT", f"Invalid {field}.", (Violation(field, "Invalid page token."),))
    return data
