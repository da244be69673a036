"""One training job as plain data, and the function that runs it.

A :class:`FitJob` holds everything a fit needs - the observations' arrays, the KPI profile's
fields, the clock and, for a warm start, the previous model's parameters - and nothing that
talks to a knowledge base or a cluster, so it pickles: :func:`run_fits` is the same code
inline on the controller's thread, in a worker process or on a Dask worker, and returns the
effect documents for the caller to store. Each result carries the CPU time the fit cost,
measured, so a training schedule can budget by it (:mod:`planner.control.training_schedule`).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from planner.domain.intents import KPIProfileSpec
from planner.models.effects import to_document
from planner.models.observations import Dataset
from planner.models.training import fit_effect


@dataclass(frozen=True)
class FitJob:
    """One objective of one intent to fit."""

    intent: str
    objective: str
    spec: KPIProfileSpec
    """The objective's KPI profile fields (type, percentile)."""
    dataset: Dataset
    now: float
    """The fitted model's timestamp."""
    min_samples: int
    start: tuple[float, ...] | None = None
    """The previous latency model's ``theta_`` over the same node classes (warm start)."""
    new_rows: int = 0
    """Observations since the previous model (recorded in the model's metadata)."""


@dataclass(frozen=True)
class FitResult:
    intent: str
    objective: str
    document: dict[str, Any] | None
    """The effect document to store; ``None`` when the data cannot support a model."""
    cpu_s: float
    """CPU time of the fit (this thread's: right whatever else the process runs)."""
    reason: str = ""
    """Why there is no document."""


def run_fit(job: FitJob) -> FitResult:
    """Fit ``job``; its CPU time goes into the document's ``metadata.training``."""
    t0 = time.thread_time()
    try:
        model = fit_effect(job.intent, job.objective, job.spec, job.dataset, job.now,
                           job.min_samples, start=job.start)
    except ValueError as exc:
        return FitResult(job.intent, job.objective, None, time.thread_time() - t0, str(exc))
    cpu = time.thread_time() - t0
    training = {"cpu_s": round(cpu, 4), "warm_start": job.start is not None,
                "rows": len(job.dataset), "new_rows": job.new_rows}
    model = dataclasses.replace(model, metadata={**model.metadata, "training": training})
    return FitResult(job.intent, job.objective, to_document(model), cpu)


def run_fits(jobs: list[FitJob]) -> list[FitResult]:
    """:func:`run_fit` on each job (one task of a worker: the objectives of one intent)."""
    return [run_fit(job) for job in jobs]
