"""Best-of-N timing shared by the benchmarks.

The benchmarks run as scripts (``python bench/<name>.py``), which puts this directory on
``sys.path``: they import this module as ``from _timing import ...``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` timed calls of ``fn``, in seconds."""
    return best_times([fn], repeat)[0]


def best_times(fns: Sequence[Callable[[], object]], repeat: int) -> list[float]:
    """The fastest of ``repeat`` runs of each function, in seconds.

    The functions run interleaved (each round calls them in order), so that load from other
    processes hits them alike.
    """
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


def paired_best_of(
    fn: Callable[[], object], base: Callable[[], object], repeat: int
) -> tuple[float, float]:
    """Best-of-``repeat`` times of ``fn`` and ``base``, measured alternately (shared noise).

    Each round times ``base`` first, then ``fn``.
    """
    t_base, t_fn = best_times([base, fn], repeat)
    return t_fn, t_base
