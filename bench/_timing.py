"""Timing shared by the benchmarks: interleaved blocks, paired ratios, and the machine's record.

The benchmarks run as scripts (``python bench/<name>.py``), which puts this directory on
``sys.path``: they import this module as ``from _timing import ...``.

Why blocks and paired ratios (issue 17): timing call by call, each engine's call right after the
other's, biases the comparison. A quantemu call leaves OpenBLAS threads spinning, which slows
onnxruntime's next call about 2x, and load from other processes comes and goes over seconds.
:func:`compare` therefore runs each engine in a block (at least ``min_calls`` calls and
``min_seconds`` of it), then the next engine, for ``rounds`` rounds, and takes the ratio of the
per-call times *within each round*: the engines share that round's machine state, so the ratio
is steadier than either time. The first call of each block is untimed: it pays for the previous
engine's leftovers (spinning threads, evicted caches), a cost of switching engines that a user
running one of them never sees. The result is the median paired ratio and its spread.

:func:`machine_record` lists what the numbers depend on: cores, thread settings, and the BLAS
library with the CPU kernel it picked at load time.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


# --- interleaved blocks -------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """Per-call seconds of each engine in each round (``times[engine][round]``).

    Engine 0 is the one measured; the others are baselines. ``ratios(i)`` are the per-round
    ratios engine 0 / engine ``i``.
    """

    names: tuple[str, ...]
    times: tuple[tuple[float, ...], ...]
    calls: tuple[int, ...]  # timed calls per engine, over all rounds

    def median_time(self, engine: int = 0) -> float:
        return statistics.median(self.times[engine])

    def ratios(self, base: int = 1) -> list[float]:
        return [t / b for t, b in zip(self.times[0], self.times[base], strict=True)]

    def ratio(self, base: int = 1) -> float:
        """The median over rounds of the paired ratio engine 0 / engine ``base``."""
        return statistics.median(self.ratios(base))

    def spread(self, base: int = 1) -> tuple[float, float]:
        """The smallest and largest paired ratio."""
        r = self.ratios(base)
        return min(r), max(r)

    def quartiles(self, base: int = 1) -> tuple[float, float]:
        """The first and third quartile of the paired ratios (the min and max below 4 rounds)."""
        r = self.ratios(base)
        if len(r) < 4:
            return min(r), max(r)
        q = statistics.quantiles(r, n=4, method="inclusive")
        return q[0], q[2]

    def summary(self, base: int = 1) -> str:
        """``ratio 5.31x (IQR 5.10-5.52, min-max 4.90-6.01, 7 rounds)``; no IQR below 4."""
        lo, hi = self.spread(base)
        q1, q3 = self.quartiles(base)
        rounds = len(self.times[0])
        iqr = f"IQR {q1:.2f}-{q3:.2f}, " if rounds >= 4 else ""
        return f"ratio {self.ratio(base):6.2f}x ({iqr}min-max {lo:.2f}-{hi:.2f}, {rounds} rounds)"


def time_block(fn: Callable[[], object], min_calls: int, min_seconds: float, warmup: int) -> tuple:
    """``(seconds per call, calls)`` of one block: ``warmup`` untimed calls, then at least
    ``min_calls`` timed calls and ``min_seconds`` of them."""
    for _ in range(warmup):
        fn()
    calls = 0
    t0 = time.perf_counter()
    elapsed = 0.0
    while calls < min_calls or elapsed < min_seconds:
        fn()
        calls += 1
        elapsed = time.perf_counter() - t0
    return elapsed / calls, calls


def compare(
    fns: Sequence[Callable[[], object]],
    rounds: int = 7,
    *,
    names: Sequence[str] | None = None,
    min_calls: int = 3,
    min_seconds: float = 0.3,
    warmup: int = 1,
) -> Comparison:
    """Time ``fns`` (the measured engine first, then its baselines) in interleaved blocks.

    Each round runs one block per engine; the order alternates between rounds (forward, then
    backward) so that no engine always follows the same one.
    """
    if len(fns) < 2 or rounds < 1 or min_calls < 1:
        raise ValueError(f"need 2+ engines, rounds >= 1, min_calls >= 1; got {len(fns)}, "
                         f"{rounds}, {min_calls}")  # fmt: skip
    times: list[list[float]] = [[] for _ in fns]
    calls = [0] * len(fns)
    order = list(range(len(fns)))
    for r in range(rounds):
        for i in order if r % 2 == 0 else order[::-1]:
            per_call, n = time_block(fns[i], min_calls, min_seconds, warmup)
            times[i].append(per_call)
            calls[i] += n
    labels = tuple(names) if names else tuple(f"engine {i}" for i in range(len(fns)))
    return Comparison(labels, tuple(tuple(t) for t in times), tuple(calls))


def paired(
    fn: Callable[[], object], base: Callable[[], object], rounds: int = 7, **kwargs
) -> Comparison:
    """:func:`compare` of ``fn`` against one baseline."""
    return compare([fn, base], rounds, **kwargs)


# --- best of N (absolute times, no ratio) -------------------------------------------------------


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` timed calls of ``fn``, in seconds (absolute throughput only;
    ratios go through :func:`compare`)."""
    return best_times([fn], repeat)[0]


def best_times(fns: Sequence[Callable[[], object]], repeat: int) -> list[float]:
    """The fastest of ``repeat`` runs of each function, in seconds, call by call interleaved."""
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
    """Median per-call times ``(fn, base)`` from :func:`paired` with ``repeat`` rounds.

    Kept for callers written for best-of-N; the times now come from interleaved blocks.
    """
    c = paired(fn, base, max(1, repeat))
    return c.median_time(0), c.median_time(1)


# --- thread settings and BLAS kernel ------------------------------------------------------------


@functools.cache
def _openblas() -> tuple[ctypes.CDLL, str] | None:
    """NumPy's OpenBLAS as loaded in this process, and its symbol suffix, if it is OpenBLAS."""
    import numpy  # noqa: F401, PLC0415 (loads the library we look for)

    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return None
    for path in sorted(p for p in paths if p.startswith("/")):
        lib = ctypes.CDLL(path)
        for prefix, suffix in (("scipy_openblas", "64_"), ("openblas", ""), ("openblas", "64_")):
            if hasattr(lib, f"{prefix}_get_corename{suffix}"):
                return lib, f"{prefix}_%s{suffix}"
    return None


def _openblas_call(name: str, *args):
    found = _openblas()
    if found is None:
        return None
    lib, pattern = found
    fn = getattr(lib, pattern % name)
    if name == "get_corename":
        fn.restype = ctypes.c_char_p
        return fn().decode()
    return fn(*args)


def _numpy_blas() -> str:
    import numpy  # noqa: PLC0415

    try:
        config = numpy.show_config(mode="dicts")
    except TypeError:  # NumPy < 1.26 has no mode
        return f"numpy {numpy.__version__}"
    blas = config.get("Build Dependencies", {}).get("blas", {})
    simd = config.get("SIMD Extensions", {}).get("found", [])
    build = blas.get("openblas configuration", "")
    return (
        f"numpy {numpy.__version__}, BLAS {blas.get('name', '?')} {blas.get('version', '')}"
        f" ({build}); NumPy SIMD found: {' '.join(simd) or '-'}"
    )


def _threadpools() -> list[str]:
    try:
        from threadpoolctl import threadpool_info  # noqa: PLC0415 (optional)
    except ImportError:
        return ["threadpoolctl: not installed"]
    return [
        f"threadpool {p.get('internal_api')} {p.get('version')}: {p.get('num_threads')} threads,"
        f" {p.get('architecture', '?')} ({os.path.basename(p.get('filepath', ''))})"
        for p in threadpool_info()
    ]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def machine_record() -> list[str]:
    """Lines describing what the timings depend on: cores, thread settings, BLAS kernel."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 0
    env = ", ".join(f"{v}={os.environ.get(v, '(unset)')}" for v in THREAD_VARS)
    lines = [
        f"machine: {_cpu_model()}, {cores} usable of {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        f"thread env: {env}",
        _numpy_blas(),
    ]
    core = _openblas_call("get_corename")
    if core is not None:
        threads = _openblas_call("get_num_threads")
        lines.append(f"OpenBLAS kernel (corename): {core}; {threads} threads")
    lines += _threadpools()
    return lines


@contextlib.contextmanager
def blas_threads(n: int | None) -> Iterator[str]:
    """Limit NumPy's BLAS to ``n`` threads (``None``: leave it); yields how it was done.

    threadpoolctl when installed, else OpenBLAS's own setter through ctypes.
    """
    if n is None:
        yield "default"
        return
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415 (optional)
    except ImportError:
        threadpool_limits = None
    if threadpool_limits is not None:
        with threadpool_limits(n):
            yield "threadpoolctl"
        return
    before = _openblas_call("get_num_threads")
    if before is None:
        yield "not limited (no threadpoolctl, BLAS is not OpenBLAS)"
        return
    _openblas_call("set_num_threads", n)
    try:
        yield "openblas_set_num_threads"
    finally:
        _openblas_call("set_num_threads", before)


def onnxruntime_session(model, threads: int | None):
    """An onnxruntime CPU session of ``model`` (a path or an ONNX ModelProto), its intra-op
    threads limited to ``threads`` (``None``: onnxruntime's default, the physical cores)."""
    import onnxruntime  # noqa: PLC0415 (a test-extra dependency, needed by the baselines only)

    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    source = str(model) if isinstance(model, str | os.PathLike) else model.SerializeToString()
    return onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])
