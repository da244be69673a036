"""Where model fits run: the training hook hands a :class:`FitBackend` one task per intent
(:func:`planner.models.fit_job.run_fits` on plain-data jobs) and stores the results itself,
on the controller's side, as they complete.

* ``inline``: on the caller's thread, before :meth:`FitBackend.submit` returns (simulations:
  deterministic).
* ``thread``: one worker thread (a live controller's default: a cycle never waits).
* ``processes``: a :class:`~concurrent.futures.ProcessPoolExecutor` of ``workers`` processes
  (started with ``spawn``: the controller's threads are not forked).
* ``dask``: ``Client.submit`` on a Dask cluster (``daskScheduler``), or a ``LocalCluster`` of
  ``workers`` processes; the workers need this package installed (``intent-planner[dask]``).
"""

from __future__ import annotations

import multiprocessing
from abc import ABC, abstractmethod
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, Protocol

from planner.domain.admin import TrainingSettings
from planner.models.fit_job import FitJob, FitResult, run_fits


class Handle(Protocol):
    """A submitted task: a :class:`concurrent.futures.Future` or a Dask future."""

    def done(self) -> bool: ...

    def result(self) -> Any: ...


class FitBackend(ABC):
    """Runs :func:`run_fits`. ``submit`` returns a handle whose ``result()`` is the list of
    :class:`FitResult`; ``slots`` is how many tasks are worth having under way at once."""

    name: str = ""
    slots: int = 1

    @abstractmethod
    def submit(self, jobs: list[FitJob]) -> Handle: ...

    def close(self) -> None:  # noqa: B027 - optional
        """Stop the workers (tasks under way are abandoned)."""


class InlineBackend(FitBackend):
    name = "inline"

    def submit(self, jobs: list[FitJob]) -> Handle:
        fut: Future[list[FitResult]] = Future()
        try:
            fut.set_result(run_fits(jobs))
        except Exception as exc:  # reported by the caller, as a pool's failure would be
            fut.set_exception(exc)
        return fut


class ExecutorBackend(FitBackend):
    """A :mod:`concurrent.futures` executor (a thread or a pool of processes)."""

    def __init__(self, name: str, executor: Executor, slots: int) -> None:
        self.name = name
        self.executor = executor
        self.slots = slots

    def submit(self, jobs: list[FitJob]) -> Handle:
        return self.executor.submit(run_fits, jobs)

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


class DaskBackend(FitBackend):
    """``Client.submit`` on a Dask cluster; a ``LocalCluster`` when no address is given."""

    name = "dask"

    def __init__(self, address: str | None, workers: int, processes: bool = True) -> None:
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError as exc:  # an optional dependency
            raise RuntimeError("training.executor dask needs dask.distributed: "
                               "pip install 'intent-planner[dask]'") from exc
        self.cluster: Any = None
        if address is None:
            self.cluster = LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=workers, threads_per_worker=1, processes=processes,
                dashboard_address=None)
            self.client: Any = Client(self.cluster)  # type: ignore[no-untyped-call]
        else:
            self.client = Client(address)  # type: ignore[no-untyped-call]
        self.slots = max(1, len(self.client.scheduler_info().get("workers", {})) or workers)

    def submit(self, jobs: list[FitJob]) -> Handle:
        fut: Handle = self.client.submit(run_fits, jobs, pure=False)
        return fut

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def create(settings: TrainingSettings, threaded: bool) -> FitBackend:
    """The backend ``settings.executor`` names (``auto``: ``thread`` when ``threaded``, else
    ``inline``)."""
    kind = settings.executor
    if kind == "auto":
        kind = "thread" if threaded else "inline"
    if kind == "inline":
        return InlineBackend()
    if kind == "thread":
        return ExecutorBackend("thread", ThreadPoolExecutor(1, thread_name_prefix="trainer"), 1)
    if kind == "processes":
        pool = ProcessPoolExecutor(settings.workers,
                                   mp_context=multiprocessing.get_context("spawn"))
        return ExecutorBackend("processes", pool, settings.workers)
    return DaskBackend(settings.dask_scheduler, settings.workers)
