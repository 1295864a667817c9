"""Where a stage's shard tasks run: a thread pool (default), a process pool, or a Dask cluster (prefect-dask) — a
loopback LocalCluster when `workers="dask"` without an address, or the scheduler at `dask_address`."""

from __future__ import annotations

from prefect.task_runners import ProcessPoolTaskRunner, ThreadPoolTaskRunner


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


def map_shards(shard_task, parameters: list[dict], workers: str, dask_address: str | None, max_workers: int,
               progress=None) -> list:
    """Run `shard_task` once per parameter set on the chosen runner; results in submission order, `progress`
    advanced as each finishes. Each shard task writes its own file (skipped when it exists and verifies), so an
    interrupted stage resumes at the first unfinished shard."""
    results = []
    with task_runner(workers, dask_address, max_workers) as runner:
        futures = [runner.submit(shard_task, parameters=params) for params in parameters]
        for future in futures:
            results.append(future.result())
            if progress is not None:
                progress.advance(1)
    return results
