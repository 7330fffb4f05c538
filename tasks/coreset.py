"""Tasks of the scalable TMD coreset: parts on workers, and the caches that make a killed run resume.

* :func:`part_mapper` -- the pipeline's ``map_parts`` for
  :func:`tmdlib.select.scalable.scalable_coreset` (and ``tmd_coreset(..., engine="scalable")``): one part
  solved here with its exact pairs persisted (:func:`tmdlib.select.scalable.cache.solve_here`), several parts
  fanned out as Prefect tasks and cached (:class:`~tmdlib.select.scalable.cache.PartCache`, :func:`run_parts`).
* :func:`solve_parts_task` -- a few parts (:class:`tmdlib.select.scalable.PartSpec`) as one Prefect task run.
  A spec carries its part's graphs (compact arrays) and the task returns arrays: a worker needs no file of the
  client's, so local processes and a Dask cluster on other machines run it alike.

The caches' files are written atomically (:data:`ATOMIC`: :func:`tasks.io.write_npz`, temporaries of a killed
run removed by :func:`tasks.io.remove_stale_temps`).
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

from prefect import task

from tmdlib._runtime import on_disk, release_freed_memory  # noqa: F401  (on_disk: the select flow's)
from tmdlib.select.scalable import PartResult, solve_part
from tmdlib.select.scalable.cache import (CacheFiles, PartCache, Progress, check_part_params, part_hashes,
                                          parts_per_task, solve_here, spec_stub, status_line)

from . import io

__all__ = ["part_mapper", "run_parts", "solve_parts_task", "outside_parent_task", "ATOMIC", "on_disk", "part_hashes",
           "status_line"]

#: How the pipeline's caches write a part or a chunk of pairs: atomically, a killed writer's temporaries removed.
ATOMIC = CacheFiles(write=io.write_npz, tidy=io.remove_stale_temps)


class PartBatch:
    """The specs of one task run, boxed: runners walk a list argument (Prefect, to resolve futures in it) and may
    rebuild what they walk (Dask turned each :class:`~tmdlib.select.scalable.PartSpec` of a list, and Prefect's
    ``quote``, into plain tuples); an object of its own they pass as it is."""

    __slots__ = ("specs",)

    def __init__(self, specs):
        self.specs = list(specs)


@task(name="coreset-parts", retries=1, retry_delay_seconds=1, persist_result=False)
def solve_parts_task(batch: PartBatch) -> list[PartResult]:
    """:func:`tmdlib.select.scalable.solve_part` of a few parts, one after the other, in one task run (runs
    wherever the task runner puts it; how many: :func:`parts_per_task`)."""
    return [solve_part(spec) for spec in batch.specs]


@contextlib.contextmanager
def outside_parent_task():
    """Submit tasks from inside a task as if from the flow: Prefect's process and Dask runners ship the serialized
    context with every submitted task, and a task's context includes *its* parameters -- for the select task, the
    pool and everything passed with it, copied into every part's payload (measured: 1.8 GB peak for a 160,000-graph
    pool).  Outside the parent task's context a part carries only its own graphs."""
    from prefect.context import TaskRunContext

    token = TaskRunContext.__var__.set(None)
    try:
        yield
    finally:
        TaskRunContext.__var__.reset(token)


#: Parts done between two :func:`release_freed_memory` calls of :func:`run_parts`.
TRIM_EVERY = 16

#: Parts submitted and not yet finished at any time (``TMDSUB_PARTS_IN_FLIGHT``): enough to keep every worker
#: of a cluster busy, while the client holds the graphs of only these parts.  They go in task runs of
#: :func:`parts_per_task` parts (8 task runs in flight at 8 parts each): a cluster of more than ~8 workers
#: wants a larger value.
PARTS_IN_FLIGHT = 64


def run_parts(specs, cache: PartCache | None, submit=None, in_flight: int | None = None) -> list[PartResult]:
    """Results of every part: cached ones read, the others run and saved.

    At most ``in_flight`` parts are submitted and unfinished at a time, each spec made (its graphs read) just
    before it is submitted, so the client never holds the graphs of the whole pool.  By default the parts go
    to the flow's task runner a few per task run (:func:`solve_parts_task`, :func:`parts_per_task`); each part
    is cached and counted as its task run finishes.

    Parameters
    ----------
    specs : sequence of PartSpec
        One per part (:func:`tmdlib.select.scalable.plan_parts`: a lazy :class:`~tmdlib.select.scalable.PartPlan`).
    cache : PartCache, optional
        Finished parts (None: nothing read or saved).
    submit : callable, optional
        ``submit(spec) -> future`` of one part's :class:`PartResult` (default: :func:`solve_parts_task`
        ``.submit`` of a few specs at a time on the flow's runner).
    in_flight : int, optional
        Default :data:`PARTS_IN_FLIGHT` (or ``TMDSUB_PARTS_IN_FLIGHT``).

    Returns
    -------
    list of PartResult
        Aligned with ``specs``.
    """
    from prefect.futures import as_completed

    paths = [cache.path(spec_stub(specs, i)) if cache else None for i in range(len(specs))]
    results: list[PartResult | None] = [cache.result(p) if cache else None for p in paths]
    todo = [i for i, r in enumerate(results) if r is None]
    progress = Progress("coreset parts", len(specs), len(specs) - len(todo))
    if len(todo) < len(specs):  # a rerun says what it did not have to solve
        progress.show(f"({len(specs) - len(todo)} read from the cache)")
    per = 1 if submit else parts_per_task(len(todo))
    if per > 1:  # chosen from the parts: say so
        status_line(f"coreset parts: {len(todo)} to solve, {per} per task run (TMDSUB_PARTS_PER_TASK sets it)")
    window = max(1, int(in_flight or os.environ.get("TMDSUB_PARTS_IN_FLIGHT", PARTS_IN_FLIGHT)) // per)
    queue = iter(todo)
    futures: dict = {}
    pairs = solved = 0

    def send(group: list[int]):
        if submit:
            return submit(specs[group[0]])
        return solve_parts_task.submit(PartBatch(specs[i] for i in group))  # boxed: no runner walks or rebuilds it

    def top_up() -> None:
        while len(futures) < window:
            group = [i for _, i in zip(range(per), queue)]  # the next `per` parts (range first: none lost)
            if not group:
                return
            futures[send(group)] = group

    with outside_parent_task():
        top_up()
        while futures:
            for fut in as_completed(list(futures)):
                group = futures.pop(fut)
                done = [fut.result()] if submit else fut.result()
                for i, res in zip(group, done, strict=True):
                    if cache:
                        cache.save(paths[i], res.to_arrays())
                    results[i] = res
                    pairs += int(res.pairs_computed)
                progress.step(len(group), note=f"{pairs} exact pairs this run")
                if (solved + len(group)) // TRIM_EVERY > solved // TRIM_EVERY:  # the freed payloads' and results'
                    release_freed_memory()  # pages, back to the system
                solved += len(group)
                break  # refill the window as soon as one task run is done
            top_up()
    return results  # type: ignore[return-value]


def part_mapper(cache_dir: str | Path | None, pool, depth: int, weights, seed: int, part_size: int,
                threads: int | None = None, submit=None, hashes=None):
    """The pipeline's ``map_parts`` for :func:`tmdlib.select.scalable.scalable_coreset`, resumable via ``cache_dir``.

    * One part (pools up to ``part_size`` graphs): :func:`~tmdlib.select.scalable.cache.solve_here` -- solved in
      this process, exact pairs persisted as they come (:class:`~tmdlib.select.scalable.cache.PairStore`).
    * Several parts: a few per :func:`solve_parts_task` on the running flow's task runner (processes, or a Dask
      cluster), a bounded number in flight, finished parts cached
      (:class:`~tmdlib.select.scalable.cache.PartCache`, :func:`run_parts`; nothing cached without ``cache_dir``).

    Progress with an ETA on stderr.

    Parameters
    ----------
    cache_dir : str or Path, optional
    pool : GraphDataset or StoredGraphs
        The pool being selected from (its graphs' content hashes key the caches; computed only if needed).
    depth, weights, seed, part_size
        The selection's parameters (the caches' keys): the specs handed to ``map_parts`` must have the same.
    threads : int, optional
        numba threads of the exact TMD of a part solved here.
    submit : callable, optional
        ``submit(spec) -> future`` (default :func:`solve_parts_task` ``.submit``).
    hashes : list of str or ndarray of bytes, optional
        The pool's graph content hashes (:func:`~tmdlib.select.scalable.cache.part_hashes`) when the caller already
        has them.

    Returns
    -------
    callable
        ``map_parts(specs) -> list of PartResult``, aligned with ``specs``.
    """
    from tmdlib.distance import resolve_weights

    weights = resolve_weights(depth, weights)
    params = {"depth": depth, "weights": weights.tolist(), "seed": seed, "part_size": part_size}
    known = [hashes]

    def pool_hashes():
        if known[0] is None:
            known[0] = part_hashes(pool)
        return known[0]

    def map_parts(specs) -> list[PartResult]:
        check_part_params(specs, depth, seed, weights)
        if len(specs) == 1:
            spec = specs[0]
            return [solve_here(spec, cache_dir, [pool_hashes()[i] for i in spec.positions.tolist()] if cache_dir
                               else None, threads, ATOMIC)]
        return run_parts(specs, PartCache(cache_dir, pool_hashes(), params, ATOMIC) if cache_dir else None, submit)

    return map_parts
