"""Exact integer matrix products through BLAS, with the proof that BLAS cannot round.

A float GEMM of integer operands is exact while every partial sum it forms is an integer that the
float type holds exactly (``|v| <= 2**24`` in float32, ``2**53`` in float64), whatever order BLAS
adds in (DESIGN principle 8). :func:`matmul_exact` bounds every partial sum from the operands,
picks the fastest float type that the bound proves exact, and falls back to int64 or to Python
ints when no float type is.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.intmath.int8_engine import (
    MIN_MACS,
    GemmEngine,
    default_engine,
    int8_plan,
    run,
    zero_point,
)

__all__ = ["ArrayCache", "GemmEngine", "frozen", "matmul_exact"]

F32_EXACT = 2**24  # float32 holds every integer of magnitude <= 2**24
F64_EXACT = 2**53  # float64: every integer of magnitude <= 2**53
INT64_MAX = 2**63 - 1
_RUN_BLOCK = 32  # rows of b per block when a reduction is cut into float32 runs


class ArrayCache:
    """Values derived from arrays that cannot change: read-only, and owning their data or a
    read-only view of a read-only array that owns it (a weight matrix's transpose, say).

    Keyed by the owner's identity and the view's place in it; an entry goes when the owner is
    garbage collected. Arrays that could change are never cached: ``get`` then just calls
    ``make``.
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref, dict]] = {}
        # Batches run side by side (parallel.map_tasks): one thread makes an entry, the others
        # wait for it rather than make it again. Reentrant: a make() may use another cache.
        self._lock = threading.RLock()

    def get(self, array: np.ndarray, key, make):
        """The value for ``(array, key)``, made by ``make()`` on first use."""
        owner = _frozen_owner(array)
        if owner is None:
            return make()
        view = (array.__array_interface__["data"][0], array.shape, array.strides, array.dtype.str)
        slot = self._entries.get(id(owner))
        if slot is not None and slot[0]() is owner and (view, key) in slot[1]:
            return slot[1][view, key]  # the common case, without the lock
        with self._lock:
            slot = self._entries.get(id(owner))
            if slot is None or slot[0]() is not owner:
                slot = (weakref.ref(owner), {})
                self._entries[id(owner)] = slot
                weakref.finalize(owner, self._entries.pop, id(owner), None)
            if (view, key) not in slot[1]:
                slot[1][view, key] = make()
            return slot[1][view, key]


def frozen(array: np.ndarray) -> np.ndarray:
    """``array`` made read-only, copied first when its data could still change through another
    array (a view of writable data): what :class:`ArrayCache` can then cache.

    >>> w = np.arange(6).reshape(2, 3)
    >>> f = frozen(w.T)
    >>> f.flags.writeable, _frozen_owner(f) is not None, np.shares_memory(f, w)
    (False, True, False)
    """
    owner = array
    while not owner.flags.owndata and isinstance(owner.base, np.ndarray):
        owner = owner.base
    if owner is not array and (owner.flags.writeable or not owner.flags.owndata):
        array = array.copy()  # another array could still write this data
    array.setflags(write=False)
    return array


def _frozen_owner(array: np.ndarray) -> np.ndarray | None:
    """The read-only array owning ``array``'s data, or None when the data could change."""
    owner = array
    while not owner.flags.owndata and isinstance(owner.base, np.ndarray):
        if owner.flags.writeable:
            return None
        owner = owner.base
    if owner.flags.writeable or not owner.flags.owndata or array.flags.writeable:
        return None
    return owner


_PLANS = ArrayCache()


def _check(x, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "iufO" or arr.dtype == np.bool_:
        raise InvalidInputError(
            f"matmul_exact: {name} must hold integers (an integer array, or floats holding "
            f"integers), got dtype {arr.dtype}"
        )
    if arr.ndim < 2:
        raise InvalidInputError(
            f"matmul_exact: {name} must have at least 2 dimensions, got shape {arr.shape}; "
            "reshape vectors to (1, K) or (K, 1)"
        )
    return arr


def _magnitude(x: np.ndarray, given) -> int:
    """A bound on ``max|x|``: the caller's, the dtype's for 8-bit data, else one scan."""
    if given is not None:
        return int(given)
    if x.dtype in (np.uint8, np.int8):
        return 255 if x.dtype == np.uint8 else 128
    if x.size == 0:
        return 0
    lo, hi = x.min(), x.max()
    if x.dtype.kind == "f" and not (np.isfinite(lo) and np.isfinite(hi)):
        raise InvalidInputError("matmul_exact: float operands must hold finite integers")
    return max(abs(int(lo)), abs(int(hi)))


def _column_sums_max(b: np.ndarray) -> int:
    """``max_n sum_k |b[..., k, n]|`` as a Python int.

    Exact: integer data sums in int64 when ``K * max|b| <= 2**63 - 1``, else in Python ints;
    floats (holding integers) sum in float64, exact below 2**53, and a larger sum only routes to
    the int64 or Python-int paths, whose thresholds it passes either way (rounding is monotone).
    """
    b3 = b.reshape(-1, *b.shape[-2:])
    if b.size == 0:
        return 0
    if b.dtype.kind == "f":
        return int(np.abs(b3).sum(axis=1, dtype=np.float64).max())
    if b.dtype.itemsize <= 2:  # |b| <= 2**16 in int32, summed in int64
        return int(np.abs(b3.astype(np.int32)).sum(axis=1, dtype=np.int64).max())
    if b.dtype != object and max(abs(int(b.min())), abs(int(b.max()))) * b.shape[-2] <= INT64_MAX:
        return int(np.abs(b3.astype(np.int64)).sum(axis=1).max())
    return int(np.abs(b3.astype(object)).sum(axis=1).max())


def _runs(b: np.ndarray, limit: int) -> tuple[tuple[int, int], ...] | None:
    """Consecutive row runs of ``b`` whose column sums of ``|b|`` stay ``<= limit``, or None.

    Called with ``sum_k |b| <= 2**63 - 1`` (int64 sums exact; float64 block sums exact below
    2**53, and a rounded larger one still exceeds ``limit <= 2**24``). Runs start and end on
    multiples of ``_RUN_BLOCK`` rows. Greedy: each run ends at the last block boundary that
    keeps every column within ``limit`` (binary search on the prefix sums of the block sums).
    None when a single block already exceeds ``limit``.
    """
    length = b.shape[-2]
    b3 = b.reshape(-1, length, b.shape[-1])  # (G, L, N)
    if b.dtype.kind == "f":
        mags, acc = np.abs(b3), np.float64
    else:
        mags, acc = np.abs(b3.astype(np.int64)), np.int64
    full, rest = divmod(length, _RUN_BLOCK)
    g, n = b3.shape[0], b3.shape[2]
    parts = [mags[:, : full * _RUN_BLOCK].reshape(g, full, _RUN_BLOCK, n).sum(axis=2, dtype=acc)]
    if rest:
        parts.append(mags[:, full * _RUN_BLOCK :].sum(axis=1, keepdims=True, dtype=acc))
    sums = np.concatenate(parts, axis=1)  # (G, blocks, N)
    if sums.size and sums.max() > limit:
        return None
    sums = sums.astype(np.int64)
    blocks = sums.shape[1]
    cum = np.concatenate([np.zeros_like(sums[:, :1]), np.cumsum(sums, axis=1)], axis=1)
    runs, start = [], 0
    while start < blocks:
        lo, hi = start + 1, blocks  # lo always fits; find the largest stop that does
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if int((cum[:, mid] - cum[:, start]).max()) <= limit:
                lo = mid
            else:
                hi = mid - 1
        runs.append((start * _RUN_BLOCK, min(lo * _RUN_BLOCK, length)))
        start = lo
    return tuple(runs)


def _plan(b: np.ndarray, a_mag: int, b_max: int | None):
    """``(bound, float type or None, runs or None)`` for ``a @ b`` with ``max|a| <= a_mag``.

    With ``b_max`` (a bound on ``|b|`` the caller proved) the bound is ``a_mag * b_max * K``
    and ``b`` is never scanned. Otherwise what depends on ``b`` alone is cached for a ``b``
    that cannot change (weights).
    """
    if b_max is not None:
        bound = a_mag * int(b_max) * b.shape[-2]
        return bound, _float_type(bound), None
    bound = a_mag * _PLANS.get(b, "colmax", lambda: _column_sums_max(b))
    if bound <= F32_EXACT:
        return bound, np.float32, None
    runs = None
    if a_mag <= F32_EXACT and bound < F64_EXACT:
        limit = F32_EXACT // a_mag
        runs = _PLANS.get(b, ("runs", limit), lambda: _runs(b, limit))
    # Float32 runs are about twice as fast as one float64 GEMM, unless there are many.
    if runs is not None and len(runs) <= _MAX_RUNS:
        return bound, np.float32, runs
    return bound, _float_type(bound), None


def _float_type(bound: int):
    if bound <= F32_EXACT:
        return np.float32
    return np.float64 if bound < F64_EXACT else None


_MAX_RUNS = 16


def _as_python_ints(x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(int, 1, 1)(x).astype(object)


def _int8_product(a, b, a_max: int | None, engine, shape: tuple, *, dtype=np.int64):
    """``a @ b`` by the int8 engine, or None where its plan cannot prove it exact (see
    :mod:`~quantemu.intmath.int8_engine`). Only for frozen 2-D weights ``b`` (or ``(1, K, N)``):
    the engine's state is built once per weight matrix (``engine``: a GemmEngine or None)."""
    if engine is None:
        # The default skips GEMMs too small to gain, and an ``a`` whose rows and columns are
        # both strided: gathering it into u8 rows costs more than the float GEMM, which reads
        # it in place. Contiguous columns (NVDLA's im2col) the engine reads in place too.
        rows = a.strides[-1] == a.itemsize or a.swapaxes(-1, -2).flags.c_contiguous
        if a.size // a.shape[-1] * b.size < MIN_MACS or not rows:
            return None
        engine = default_engine()
    if b.ndim > 2 and b.size == b.shape[-2] * b.shape[-1]:  # one group: (1, K, N), say
        b = b.reshape(b.shape[-2:])
    if engine is GemmEngine.NUMPY or b.ndim != 2 or a.dtype.kind not in "iuf":
        return None
    if a_max is not None and a_max > 255:
        return None
    if _frozen_owner(b) is None:
        return None
    plan = _PLANS.get(b, ("int8", engine), lambda: int8_plan(b, engine))
    z = None if plan is None else zero_point(a, a_max)
    return None if z is None else run(plan, a, z, dtype=dtype).reshape(shape)


def matmul_exact(
    a,
    b,
    *,
    a_max: int | None = None,
    b_max: int | None = None,
    engine: GemmEngine | None = None,
    allow_int32: bool = False,
):
    """The exact integer product ``a @ b`` (NumPy ``matmul`` broadcasting of batch axes).

    Formula on ℤ: ``out[..., m, n] = sum_k a[..., m, k] * b[..., k, n]``.

    Policy: exact, never wraps nor saturates. Operands are integer arrays, or float arrays
    holding integers (not checked: callers gather integer data as float to feed BLAS without a
    conversion pass). The result is int64 when the bound below is ``<= 2**63 - 1``, else an
    object array of Python ints. ``a_max``: a bound on ``|a|`` the caller has proved (8-bit
    dtypes give theirs; otherwise one scan finds it). ``b_max``: a bound on ``|b|`` the caller
    has proved; the proof below then uses ``C_n <= K * b_max`` and ``b`` is not scanned (for a
    ``b`` that changes on every call, such as im2col columns).

    Proof. With ``A >= max|a|`` and ``C_n = sum_k |b[k, n]|``, every partial sum BLAS can form
    for output ``n``, in any order and over any subset of ``k``, is at most ``A * C_n`` in
    magnitude (triangle inequality; the operands themselves, ``|a| <= A`` and ``|b| <= C_n``,
    convert exactly wherever the bound does). With ``bound = A * max_n C_n``:

    - ``bound <= 2**24``: one float32 GEMM is exact;
    - else, with ``bound < 2**53``, if the reduction cuts into at most 16 runs of rows with
      ``A * sum_run |b[:, n]| <= 2**24`` each: one exact float32 GEMM per run, the runs added in
      float64 (every partial total is at most ``bound < 2**53``: exact);
    - else ``bound < 2**53``: one float64 GEMM;
    - else ``bound <= 2**63 - 1``: an int64 matmul (no partial sum leaves int64);
    - else Python ints.

    What depends on ``b`` alone is cached for a read-only ``b`` that owns its data (weights).

    ``engine``: who computes it (:class:`GemmEngine`); None picks
    :func:`~quantemu.intmath.int8_engine.default_engine` (``ORT`` where onnxruntime is installed
    and self-checked, else ``NUMPY``). The int8 engine takes frozen 2-D s8 weights ``b`` without
    ``b_max``, when its own bound proves the s32 accumulator exact and ``a`` fits u8 with a zero
    point; everything else takes the path above. The default engine also leaves to ``NUMPY``
    GEMMs under ``MIN_MACS`` multiply-adds and an ``a`` with neither rows nor columns
    contiguous.
    ``allow_int32``: a product the int8 engine computes comes back as its exact s32 result,
    int32, without the widening pass; every other path still returns int64 (or Python ints).

    Mirrors: no instruction; it is the exact sum of products that wide accumulators (XS3
    ``VLMACCR`` before saturation, oneDNN VNNI/AMX ``s32``, NVDLA CACC) hold.

    >>> matmul_exact(np.array([[127, -128]], np.int8), np.array([[-128], [-128]], np.int8))
    array([[128]])
    >>> big = np.full((1, 3), 2**31 - 1)
    >>> matmul_exact(big, big.T).tolist(), matmul_exact(big, big.T * 2).dtype
    ([[13835058042397261827]], dtype('O'))
    """
    a, b = _check(a, "a"), _check(b, "b")
    if a.shape[-1] != b.shape[-2]:
        raise InvalidInputError(
            f"matmul_exact: inner dimensions differ: a {a.shape} and b {b.shape}"
        )
    shape = (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])
    a_mag = 0 if a.size == 0 or b.size == 0 else _magnitude(a, a_max)
    if a_mag == 0:
        return np.zeros(shape, dtype=np.int64)
    if b_max is None:
        dtype = np.int32 if allow_int32 else np.int64
        fast = _int8_product(a, b, a_max, engine, shape, dtype=dtype)
        if fast is not None:
            return fast
    bound, ftype, runs = _plan(b, a_mag, b_max)
    if bound == 0:
        return np.zeros(shape, dtype=np.int64)
    if ftype is None:
        if bound <= INT64_MAX:  # every partial sum is in int64
            return np.matmul(a.astype(np.int64), np.asarray(b, np.int64))
        return np.matmul(_as_python_ints(a), _as_python_ints(b))
    bf = _PLANS.get(b, np.dtype(ftype).name, lambda: np.asarray(b, ftype, order="C"))
    if runs is None or len(runs) == 1:
        return np.matmul(np.asarray(a, ftype), bf).astype(np.int64)
    total = np.zeros(shape)  # float64: |every partial sum of the runs| <= bound < 2**53
    for start, stop in runs:  # each run an exact float32 GEMM (see the proof above)
        # Column slices of a stay views: BLAS reads them with a leading dimension (no copy).
        part = np.matmul(np.asarray(a[..., start:stop], np.float32), bf[..., start:stop, :])
        total += part
    return total.astype(np.int64)
