"""Where a stage's shard tasks run: a thread pool (default), a process pool, or a Dask cluster (prefect-dask) — a
loopback LocalCluster when `workers="dask"` without an address, or the scheduler at `dask_address`."""

from __future__ import annotations

from typing import ClassVar, Literal

from prefect.task_runners import ProcessPoolTaskRunner, ThreadPoolTaskRunner
from pydantic import Field

from tasks.core.config import Settings

POOL_SIZE = 2  # shards at once on a process pool or a loopback Dask cluster (the 2-core machines it is built on)


class ExecutionSettings(Settings):
    """Where a sharded stage's shards run (retrieve-contexts, label-pairs): how the work is done, never what it
    returns, so none of it enters a cache key."""

    NOT_IN_KEY: ClassVar[frozenset[str]] = frozenset({"workers", "max_workers", "dask_address"})

    workers: Literal["threads", "processes", "dask"] = Field(
        "threads", description="Shard runner; 'dask' without dask_address starts a loopback LocalCluster.")
    max_workers: int | None = Field(None, ge=1, description="Shards at once; None: the stage's own choice on threads "
                                    f"(retrieve 2; label 1, its LM already uses every core), {POOL_SIZE} otherwise.")
    dask_address: str | None = Field(None, description="Scheduler of an existing Dask cluster (tcp://host:8786).")

    def pool_size(self, threads: int) -> int:
        """Shards at once: max_workers, else `threads` (the stage's choice) on a thread pool, POOL_SIZE otherwise."""
        return self.max_workers or (threads if self.workers == "threads" else POOL_SIZE)


def runner_kind(workers: str, dask_address: str | None) -> str:
    """The runner actually used (an address means Dask, whatever `workers` says): recorded in manifests."""
    return "dask" if dask_address else workers


def task_runner(workers: str, dask_address: str | None, max_workers: int):
    if runner_kind(workers, dask_address) == "dask":
        from prefect_dask import DaskTaskRunner

        return DaskTaskRunner(address=dask_address) if dask_address else DaskTaskRunner(
            cluster_kwargs={"n_workers": max_workers, "processes": True, "host": "127.0.0.1",
                            "dashboard_address": None})
    if workers == "processes":
        return ProcessPoolTaskRunner(max_workers=max_workers)
    return ThreadPoolTaskRunner(max_workers=max_workers)


def map_shards(shard_task, parameters: list[dict], execution: ExecutionSettings, threads: int,
               progress=None, weights: list[int] | None = None) -> list:
    """Run `shard_task` once per parameter set on the chosen runner; results in submission order, `progress`
    advanced as each finishes (by its entry of `weights`, default 1: the work a shard holds, where shards differ or
    the stage's progress counts other work too). Each shard task writes its own file (skipped when it exists and
    verifies), so an interrupted stage resumes at the first unfinished shard. `threads`: the stage's pool size on
    threads."""
    weights = [1] * len(parameters) if weights is None else weights
    if len(weights) != len(parameters):  # checked before any shard runs, not after the work
        raise ValueError(f"map_shards: {len(weights)} weights for {len(parameters)} shards")
    results = []
    with task_runner(execution.workers, execution.dask_address, execution.pool_size(threads)) as runner:
        futures = [runner.submit(shard_task, parameters=params) for params in parameters]
        for future, weight in zip(futures, weights):
            results.append(future.result())
            if progress is not None:
                progress.advance(weight)
    return results
