"""``evaluate`` on a Dask cluster (``prog.evaluate(data, labels, client=client)``).

The evaluation's batches (the same ``batch_size`` batches over the same sample order as on one
machine) run as tasks on the cluster's workers; the client merges their measurements in batch
order, so every count, histogram and float sum of the :class:`Evaluation` is what one process
computes (:meth:`~quantemu.simulate.metrics.LayerAccumulator.add` in the same order).

- **The program is shipped once**: its recipe (the program's
  :class:`~quantemu.simulate.plan.BackendPlan`: the backend, its typed options, the prepared
  graph and the ranges) is scattered to every worker, which lowers it with
  :meth:`~quantemu.simulate.plan.BackendPlan.lower`, as ``quantemu.compile`` does, and keeps it
  for every later task of the evaluation.
- **Data goes from storage to the workers**: a sample set read lazily (``.npy``/``.npz``
  shards, an image folder) travels as its file names and each task reads its own samples; an
  in-memory array is scattered once.
- **Faults**: a task is a pure function of its batch, so when a worker dies Dask runs its tasks
  again elsewhere and the result is unchanged. A cluster that cannot be reached, or that goes
  away, is a :class:`~quantemu.errors.QuantemuError` naming the scheduler; nothing partial is
  returned.

Each worker task runs on one thread (``parallel.thread_limit(1)``), as Dask gave it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import CancelledError
from dataclasses import dataclass, replace
from typing import Any

from quantemu.errors import QuantemuError
from quantemu.intmath import parallel

TASKS_PER_WORKER = 4  # enough tasks to balance uneven workers, few enough to stay cheap
MAX_BATCHES_PER_TASK = 16
KEPT_PROGRAMS = 8  # programs a worker keeps (backends evaluated side by side interleave)

_PROGRAMS: dict[str, Any] = {}  # on a worker: recipe token -> its _Measure (without samples)
_SHIPPED: dict[tuple, tuple] = {}  # on the client: (program, client, ...) -> token, future
_LOCK = threading.Lock()


class ClusterError(QuantemuError):
    """The cluster could not be reached, or went away during the work."""


@dataclass(frozen=True)
class Recipe:
    """What a worker needs to make the program: its plan, and how to measure batches."""

    plan: Any
    floats: bool
    out_name: str
    batch_size: int


def measure_on_cluster(
    client, measure, starts: Sequence[int], on_batch: Callable[[int], None] | None
) -> Iterator:
    """The measured batches of ``starts`` (``measure``'s), computed on ``client``'s workers,
    yielded in batch order once all are done (``on_batch`` counts samples as tasks finish)."""
    return collect(submit(client, measure, starts), on_batch)


@dataclass(frozen=True)
class Pending:
    """One evaluation's tasks, submitted: its client and futures, in batch order."""

    client: Any
    futures: list


def submit(client, measure, starts: Sequence[int]) -> Pending:
    """Queue the tasks of ``starts`` on ``client``'s workers; :func:`collect` gathers them.
    Several evaluations submitted before any is collected run side by side on the cluster."""
    groups = _groups(list(starts), _workers(client))
    with _cluster_errors(client):
        token, shipped = _shipped(client, measure)
        # an in-memory array is copied to every worker once, so that losing one loses nothing
        samples = (
            client.scatter(measure.samples, broadcast=True) if _in_memory(measure.samples) else None
        )
        futures = [
            client.submit(
                _measure_batches,
                token,
                shipped,
                measure.samples if samples is None else samples,
                group,
                pure=False,
                key=f"quantemu-evaluate-{token[:12]}-{i}",
            )
            for i, group in enumerate(groups)
        ]
    return Pending(client, futures)


def collect(pending: Pending, on_batch: Callable[[int], None] | None) -> Iterator:
    """The measured batches of a :func:`submit`, in batch order, once all are done."""
    with _cluster_errors(pending.client):
        done = _gather(pending.client, pending.futures, on_batch)
    for batches in done:
        yield from batches


@contextlib.contextmanager
def _cluster_errors(client) -> Iterator[None]:
    """A task's own error passes as it is; a cluster that goes away is a ClusterError."""
    try:
        yield
    except QuantemuError:
        raise  # a task's own error (bad data in a shard, say), raised again here as it was
    except (OSError, TimeoutError, CancelledError, asyncio.CancelledError) as exc:
        raise ClusterError(
            f"the cluster at {_address(client)} went away during the evaluation ({exc!r}); "
            "nothing was reported: run again when it is back"
        ) from exc


def _shipped(client, measure) -> tuple[str, Any]:
    """The recipe's token and its future on ``client``'s workers, scattered once per program,
    client and batch size (a later evaluation with them ships nothing again)."""
    program = measure.program
    key = (id(program), id(client), measure.floats, measure.out_name, measure.batch_size)
    found = _SHIPPED.get(key)
    if found is not None and found[0]() is program and found[1]() is client:
        return found[2], found[3]
    recipe = Recipe(
        plan=program.plan,
        floats=measure.floats,
        out_name=measure.out_name,
        batch_size=measure.batch_size,
    )
    import cloudpickle  # noqa: PLC0415 (comes with the distributed extra)

    token = hashlib.sha256(cloudpickle.dumps(recipe)).hexdigest()
    future = client.scatter(recipe, broadcast=True)
    _SHIPPED[key] = (weakref.ref(program), weakref.ref(client), token, future)
    weakref.finalize(program, _SHIPPED.pop, key, None)
    return token, future


def _gather(client, futures: list, on_batch) -> list:
    """Every future's result, in submission order; ``on_batch`` as each one finishes."""
    from distributed import as_completed  # noqa: PLC0415 (the distributed extra)

    results: dict[Any, list] = {}
    for future in as_completed(futures):
        batches = future.result()
        results[future.key] = batches
        if on_batch is not None:
            on_batch(sum(b.size for b in batches))
    return [results[f.key] for f in futures]


def _measure_batches(token: str, recipe: Recipe, samples, starts: list[int]) -> list:
    """On a worker: the measured batches (without their runs) of ``starts``."""
    with parallel.thread_limit(1):
        measure = replace(_worker_measure(token, recipe), samples=samples)
        return [measure(start, keep_result=False) for start in starts]


def _worker_measure(token: str, recipe: Recipe):
    """The worker's program for ``recipe``, lowered once per worker and kept."""
    with _LOCK:
        found = _PROGRAMS.get(token)
        if found is None:
            from quantemu.simulate.evaluate import _Measure, accumulators  # noqa: PLC0415

            program = recipe.plan.lower()
            acc = accumulators(program)
            found = _Measure(program, recipe.floats, recipe.out_name, None, recipe.batch_size, acc)
            while len(_PROGRAMS) >= KEPT_PROGRAMS:  # the oldest goes (insertion order)
                _PROGRAMS.pop(next(iter(_PROGRAMS)))
            _PROGRAMS[token] = found
        return found


def _groups(starts: list[int], workers: int) -> list[list[int]]:
    """Consecutive batches per task: about TASKS_PER_WORKER tasks per worker."""
    per_task = max(1, math.ceil(len(starts) / max(1, workers * TASKS_PER_WORKER)))
    per_task = min(per_task, MAX_BATCHES_PER_TASK)
    return [starts[i : i + per_task] for i in range(0, len(starts), per_task)]


def _workers(client) -> int:
    try:
        return max(1, len(client.scheduler_info().get("workers", {})))
    except (OSError, TimeoutError) as exc:
        raise ClusterError(f"the cluster at {_address(client)} does not answer: {exc}") from exc


def _in_memory(samples) -> bool:
    from quantemu.calibration.feeds import FeedSamples  # noqa: PLC0415
    from quantemu.calibration.shards import ArraySamples  # noqa: PLC0415

    return isinstance(samples, ArraySamples | FeedSamples)


def _address(client) -> str:
    scheduler = getattr(client, "scheduler", None)
    return str(getattr(scheduler, "address", None) or "?")
