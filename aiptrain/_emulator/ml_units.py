"""`trainingOutput.consumedMLUnits`: what a job would have consumed on the service.

A predefined tier consumed its documented rate (`ml_units_per_hour` in scale_tiers.yaml) for each
hour between startTime and endTime (now, while the job runs). A CUSTOM cluster is priced replica by
replica as a multiple of BASIC's machine by vCPUs: an estimate, as the service priced each machine
type on its own. Rounded to two decimals, as the service reported it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from aiptrain._job.catalog import Catalog
from aiptrain._job.cluster import resolve_cluster
from aiptrain._job.spec import Job, ScaleTier, TrainingInput


def ml_units_per_hour(training_input: TrainingInput, catalog: Catalog) -> float:
    basic = catalog.tiers[ScaleTier.BASIC.value]
    tier = catalog.tiers.get((training_input.scale_tier or ScaleTier.BASIC).value)
    if tier is not None and tier.ml_units_per_hour is not None:
        return tier.ml_units_per_hour
    basic_vcpus = catalog.vcpus(basic.roles["master"].type) or 1
    rate = 0.0
    for group in resolve_cluster(training_input, catalog):
        share = (catalog.vcpus(group.machine_type) or basic_vcpus) / basic_vcpus
        rate += group.count * share * (basic.ml_units_per_hour or 0.0)
    return rate


def _instant(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def consumed_ml_units(job: Job, catalog: Catalog, now: datetime | None = None) -> float | None:
    """The job's ML units so far; None before it started (the service showed none then)."""
    if not job.start_time or job.training_input is None:
        return None
    end = _instant(job.end_time) if job.end_time else (now or datetime.now(UTC))
    hours = max(0.0, (end - _instant(job.start_time)).total_seconds() / 3600)
    return round(hours * ml_units_per_hour(job.training_input, catalog), 2)
