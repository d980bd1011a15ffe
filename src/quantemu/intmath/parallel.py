"""Element-wise kernels over large arrays, split into contiguous chunks run on several cores.

Why: an intmath primitive is a few NumPy passes over its operands, and NumPy runs each pass on
one core. NumPy releases the GIL inside its numeric loops, so chunks of one array can run their
passes on different cores at once; on large arrays (the requantization of a whole feature map)
that divides the time by about the number of cores.

Exact at any thread count: a kernel maps each output element from the same element of its
inputs, and every kernel is exact on any sub-array, its own range scan included (a chunk whose
scan cannot rule out an int64 overflow takes its exact path on its own). So results never depend
on the number of threads or on where the chunks start; the tests check this against the
Python-int references with ``==``.

The number of threads is a resource setting, not an arithmetic variant: :func:`set_threads`
and :func:`limit_threads` change speed only. Arrays below ``2 * MIN_CHUNK`` elements run on
the calling thread.

Whole tasks (a batch of images through a program) run side by side with :func:`map_tasks`:
each task runs on one core, its own primitives and NumPy's BLAS unsplit (a task already keeps
its core busy; splitting it again would only add hand-overs and oversubscribe the cores).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from quantemu.errors import InvalidInputError

T = TypeVar("T")
R = TypeVar("R")

__all__ = [
    "MIN_CHUNK",
    "limit_threads",
    "map_chunks",
    "map_parts",
    "map_tasks",
    "set_threads",
    "thread_limit",
    "threads",
]

MIN_CHUNK = 1 << 18  # elements; measured: a smaller chunk costs more to hand over than it saves
_MAX_DEFAULT = 8  # cores beyond this gain little: the passes become memory-bound

_lock = threading.Lock()
_state: dict = {"threads": None, "pool": None, "workers": 0, "pid": None}
_local = threading.local()  # .threads: 1 inside a map_tasks task (that thread only)
_blas = {"controller": None, "users": 0, "limit": None}  # BLAS held to one thread by map_tasks


def _available_cores() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        n = os.cpu_count() or 1
    return max(1, min(n, _MAX_DEFAULT))


def threads() -> int:
    """How many threads the primitives use on large arrays (the calling thread included).

    Defaults to the cores this process may run on, at most 8.

    >>> threads() >= 1
    True
    """
    local = getattr(_local, "threads", None)
    if local is not None:
        return local
    n = _state["threads"]
    return _available_cores() if n is None else n


def set_threads(n: int | None) -> int | None:
    """Use ``n`` threads (``1``: the calling thread only; ``None``: the default); returns the
    previous setting (``None`` when it was the default), which ``set_threads`` restores.
    Results are the same for every ``n``.

    >>> previous = set_threads(1)
    >>> threads()
    1
    >>> _ = set_threads(previous)
    """
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise InvalidInputError(
            f"set_threads: n must be a positive int or None (the default), got {n!r}"
        )
    with _lock:
        previous = _state["threads"]
        _state["threads"] = n
    return previous


@contextlib.contextmanager
def limit_threads(n: int | None) -> Iterator[None]:
    """Within the block, use ``n`` threads (see :func:`set_threads`).

    >>> with limit_threads(1):
    ...     threads()
    1
    """
    previous = _state["threads"]
    set_threads(n)
    try:
        yield
    finally:
        _state["threads"] = previous


@contextlib.contextmanager
def thread_limit(n: int) -> Iterator[None]:
    """Within the block, on the calling thread only, use ``n`` threads (a cluster worker's task
    thread, which must not start more threads than it was given; other threads unaffected).

    >>> with thread_limit(1):
    ...     threads()
    1
    """
    previous = getattr(_local, "threads", None)
    _local.threads = n
    try:
        yield
    finally:
        _local.threads = previous


def _pool(workers: int) -> ThreadPoolExecutor:
    """The shared pool, made again after a fork (a child inherits no worker threads)."""
    with _lock:
        pool = _state["pool"]
        forked = _state["pid"] != os.getpid()
        if pool is None or forked or _state["workers"] < workers:
            if pool is not None and not forked:
                pool.shutdown(wait=False)  # idle: its threads exit; running chunks finish
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="quantemu")
            _state.update(pool=pool, workers=workers, pid=os.getpid())
        return pool


def chunk_count(size: int, min_chunk: int | None = None) -> int:
    """How many chunks an array of ``size`` elements is split into (1: not split); chunks hold at
    least ``min_chunk`` elements (default :data:`MIN_CHUNK`; a costlier kernel per element pays
    for the hand-over sooner)."""
    least = MIN_CHUNK if min_chunk is None else min_chunk
    return max(1, min(threads(), size // max(1, least)))


def map_chunks(
    kernel: Callable[..., object],
    out: np.ndarray,
    *inputs: np.ndarray,
    min_chunk: int | None = None,
) -> list:
    """``kernel(out_chunk, *input_chunks)`` over matching contiguous chunks; the kernels' returns.

    ``out`` and ``inputs`` must be C-contiguous arrays of one shape (``out`` may be one of the
    inputs: a kernel then works in place). The calling thread runs the first chunk while the
    pool runs the others; an exception in any chunk is raised after all have finished.
    """
    flat_out = out.reshape(-1)
    flat_in = [a.reshape(-1) for a in inputs]
    n = chunk_count(flat_out.size, min_chunk)
    if n == 1:
        return [kernel(flat_out, *flat_in)]
    edges = [flat_out.size * i // n for i in range(n + 1)]
    parts = [(flat_out[a:b], *(f[a:b] for f in flat_in)) for a, b in itertools.pairwise(edges)]
    return map_parts(kernel, parts)


def map_parts(kernel: Callable[..., object], parts: Sequence[tuple]) -> list:
    """``[kernel(*part) for part in parts]``, the calling thread running the first part while
    the pool runs the others (for kernels that release the GIL: NumPy passes and copies, not
    BLAS, whose own threads stay as they are); an exception is raised after all have finished.
    """
    if len(parts) <= 1:
        return [kernel(*part) for part in parts]
    futures = [_pool(len(parts) - 1).submit(kernel, *part) for part in parts[1:]]
    try:
        first, error = [kernel(*parts[0])], None
    except BaseException as exc:  # the others still write into out: wait for them first
        first, error = [], exc
    return _collect(futures, first, error)


def _collect(futures: list, results: list, error: BaseException | None) -> list:
    """``results`` followed by every future's result, once all have ended; the first error
    (``error``, else the first future's in order) raised then."""
    for future in futures:
        try:
            results.append(future.result())
        except BaseException as exc:
            error = error or exc
    if error is not None:
        raise error
    return results


def splittable(*arrays: np.ndarray, min_chunk: int | None = None) -> bool:
    """True when the arrays share one shape, are C-contiguous and large enough to split."""
    first = arrays[0]
    return (
        first.ndim > 0
        and chunk_count(first.size, min_chunk) > 1
        and all(a.shape == first.shape and a.flags.c_contiguous for a in arrays)
    )


def map_tasks(task: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[task(item) for item in items]``, the items run side by side on :func:`threads` threads.

    Results come back in the items' order, whatever order they finish in. Within a task,
    :func:`threads` is 1 (its primitives do not split again, and a nested ``map_tasks`` runs its
    items in turn), and while tasks run NumPy's BLAS uses one thread (``threadpoolctl``; BLAS's
    thread count is process-wide, so BLAS calls made elsewhere in the process meanwhile use one
    thread too). A single item, or a single thread, runs on the calling thread, unchanged. The
    first exception (in item order) is raised once every started task has ended; items not yet
    started then do not start.

    >>> map_tasks(lambda x: (x * x, threads()), [1, 2, 3])
    [(1, 1), (4, 1), (9, 1)]
    """
    items = list(items)
    workers = min(threads(), len(items))
    if workers <= 1:
        return [task(item) for item in items]
    stop = threading.Event()

    def run(item):
        if stop.is_set():
            return None
        _local.threads = 1
        try:
            return task(item)
        except BaseException:
            stop.set()
            raise
        finally:
            _local.threads = None

    with _one_blas_thread():
        futures = [_pool(workers).submit(run, item) for item in items]
        return _collect(futures, [], None)


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """NumPy's BLAS held to one thread while any :func:`map_tasks` runs (nested calls from
    several threads share one limit; the last to leave restores the previous setting)."""
    with _lock:
        if _blas["users"] == 0:
            _blas["limit"] = _limit_blas()
        _blas["users"] += 1
    try:
        yield
    finally:
        with _lock:
            _blas["users"] -= 1
            if _blas["users"] == 0 and _blas["limit"] is not None:
                _blas["limit"].restore_original_limits()
                _blas["limit"] = None


def _limit_blas():
    """A threadpoolctl limit of BLAS to one thread, or None without threadpoolctl."""
    try:
        from threadpoolctl import ThreadpoolController  # noqa: PLC0415 (loaded on first use)
    except ImportError:  # pragma: no cover - a core dependency; tasks then share BLAS's threads
        return None
    if _blas["controller"] is None:
        _blas["controller"] = ThreadpoolController()  # finds the libraries once (milliseconds)
    return _blas["controller"].limit(limits=1, user_api="blas")
