"""The row groups, in table order. Each module measures one group and returns its rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.context import BenchContext
from bench.harness import RowResult


@dataclass(frozen=True)
class RowGroup:
    name: str  # what --only takes
    number: str  # the table's row number prefix
    title: str
    run: Callable[[BenchContext], list[RowResult]]


def all_groups() -> list[RowGroup]:
    # Imported here so `--only` of one group does not import the others' dependencies.
    from bench.rows import (
        cli_start,
        console,
        containers,
        dry_run,
        engine_overhead,
        era,
        gcloud_compare,
        gcs_endpoint,
        log_latency,
        long_running,
        memory,
        packaging,
        proxy,
        python2_envs,
        ray,
        runtime_envs,
        serve_on_ray,
        store_scale,
        training,
        upload,
        vertex_sdk,
    )

    return [
        RowGroup("cli-start", "1", "CLI start", cli_start.run),
        RowGroup("packaging", "2", "Packaging", packaging.run),
        RowGroup("dry-run", "3", "Dry-run", dry_run.run),
        RowGroup("upload", "4", "Upload", upload.run),
        RowGroup("log-latency", "5", "Log latency", log_latency.run),
        RowGroup("engine-overhead", "6", "Local engine overhead", engine_overhead.run),
        RowGroup("store-scale", "7", "Scale of the store", store_scale.run),
        RowGroup("memory", "8", "Memory", memory.run),
        RowGroup("training", "9", "Training", training.run),
        RowGroup("runtime-envs", "10", "Runtime environments", runtime_envs.run),
        RowGroup("gcloud", "11", "aiptrain vs Google's gcloud", gcloud_compare.run),
        RowGroup("gcs-endpoint", "12", "gs:// from trainer code on the local backend", gcs_endpoint.run),
        RowGroup("ray", "13", "Ray backend", ray.run),
        RowGroup("era", "14", "The runtime's day and the VM's metadata server", era.run),
        RowGroup("console", "15", "The console in the browser", console.run),
        RowGroup("containers", "16", "Container jobs", containers.run),
        RowGroup("long-running", "17", "A machine that runs jobs for months", long_running.run),
        RowGroup("vertex-sdk", "18", "The Vertex AI SDK via `local serve`", vertex_sdk.run),
        RowGroup("proxy", "19", "Google's clients through `local serve`'s proxy", proxy.run),
        RowGroup("python2-envs", "20", "Python 2.7 runtime environments", python2_envs.run),
        RowGroup("serve-on-ray", "21", "`local serve` with its jobs on a Ray cluster", serve_on_ray.run),
    ]
