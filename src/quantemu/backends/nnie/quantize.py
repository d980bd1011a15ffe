"""Per-layer clip selection for NNIE from calibration data: max-abs, and an MSE search.

MQBench's NNIE flow (``notes/toolchains.md``) takes the clip as the running max of ``|x|`` over
the calibration batches and exports it raw; NNIE's mapper wants a table value, so here the
max-abs clip is snapped to the table (:func:`.cliptable.snap_clip`). The MSE search tries the
table values ``c_k`` for ``k`` in a window around the max-abs ``k`` and keeps the one whose
log-quantized tensor is closest to the float tensor in mean squared error.

Why the search is cheap and vectorized over candidates: the code of an element depends only on
its grid key (:mod:`.grid`) and ``z``, so :class:`LogObserver` keeps, per key, the count, the
mean and the centred sum of squares of the values (merged across batches with Chan et al.'s
parallel update). For any ``z`` the error of a key's elements is then
``m2 + n*(mean - level)^2``, and all candidates x all used keys (a few thousand) are evaluated
at once as one array (chunked over candidates if that array would be large). Centring keeps the
sum accurate: within a key the values agree to about 2%.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from quantemu.backends.nnie import grid
from quantemu.backends.nnie.cliptable import ClipTable, SnapResult, default_clip_table, snap_clip
from quantemu.backends.nnie.ops import codes_of_keys, float32_keys, level_table
from quantemu.backends.nnie.params import LEVELS
from quantemu.errors import InvalidInputError

DEFAULT_BELOW = 32  # two octaves of clipping below the max-abs k
DEFAULT_ABOVE = 4  # a quarter octave above it (snapping may land below max|x|)
_CHUNK_ELEMENTS = 1 << 22  # candidates x used keys per evaluated chunk (32 MiB of float64)


class LogObserver:
    """Calibration statistics of one tensor for NNIE clip selection (feed batches to ``update``).

    >>> obs = LogObserver()
    >>> obs.update(np.array([0.5, -2.0, 0.0], np.float32))
    >>> obs.count, obs.max_abs
    (3, 2.0)
    """

    def __init__(self) -> None:
        self.count_per_key = np.zeros(grid.N_KEYS, dtype=np.int64)
        self.mean = np.zeros(grid.N_KEYS, dtype=np.float64)
        self.m2 = np.zeros(grid.N_KEYS, dtype=np.float64)
        self.max_abs = 0.0

    @property
    def count(self) -> int:
        """Number of elements seen."""
        return int(self.count_per_key.sum())

    def update(self, x: np.ndarray) -> None:
        """Add a float32 batch. NaN and infinities are errors (no MSE can be computed)."""
        keys, _ = float32_keys(x, "calibration batch")
        infinite = np.count_nonzero((keys == grid.N_MAG - 1) | (keys == 2 * grid.N_MAG - 1))
        if infinite:
            raise InvalidInputError(
                f"calibration batch contains {infinite} infinite value(s); clip selection needs "
                "finite data: remove or replace them"
            )
        values = np.asarray(x, dtype=np.float64).reshape(-1)
        n_b = np.bincount(keys, minlength=grid.N_KEYS)
        used = np.flatnonzero(n_b)
        mean_b = np.zeros(grid.N_KEYS)
        mean_b[used] = np.bincount(keys, weights=values, minlength=grid.N_KEYS)[used] / n_b[used]
        m2_b = np.bincount(keys, weights=(values - mean_b[keys]) ** 2, minlength=grid.N_KEYS)
        # Chan, Golub & LeVeque: merge (n, mean, M2) of two samples, here per key.
        n_a, n = self.count_per_key[used], self.count_per_key[used] + n_b[used]
        delta = mean_b[used] - self.mean[used]
        self.mean[used] += delta * (n_b[used] / n)
        self.m2[used] += m2_b[used] + delta**2 * (n_a * n_b[used] / n)
        self.count_per_key[used] = n
        if values.size:
            self.max_abs = max(self.max_abs, float(np.max(np.abs(values))))

    def mse(self, ks: np.ndarray) -> np.ndarray:
        """Mean squared error of log-quantizing everything seen with each clip ``2^(k/16)``.

        Levels that overflow float32 make the error ``inf``.
        """
        if self.count == 0:
            raise InvalidInputError("no calibration data: call update() with a batch first")
        ks = np.asarray(ks, dtype=np.int64).reshape(-1)
        used = np.flatnonzero(self.count_per_key[: grid.KEY_ZERO])  # zeros quantize exactly
        sign, f, exact = (field[used] for field in grid.key_fields())
        n, mean = self.count_per_key[used].astype(np.float64), self.mean[used]
        chunk = max(1, _CHUNK_ELEMENTS // max(1, used.size))
        sse = np.empty(ks.size)
        # A loop over chunks of candidates (each chunk one vectorized evaluation), not over data.
        for start in range(0, ks.size, chunk):
            z = ks[start : start + chunk, None] - (LEVELS - 1)
            codes = codes_of_keys(sign, f, exact, z)
            levels = np.stack([level_table(int(zi)) for zi in z[:, 0]])
            y = np.take_along_axis(levels, codes.astype(np.intp), axis=1).astype(np.float64)
            with np.errstate(over="ignore", invalid="ignore"):
                sse[start : start + chunk] = (n * (mean - y) ** 2).sum(axis=1)
        return (sse + self.m2.sum()) / self.count


@dataclass(frozen=True)
class ClipChoice:
    """A selected clip: the table entry ``clip = c_k``, ``z = k - 127``, and its MSE.

    ``candidates`` and ``mses`` are every ``k`` tried and its MSE; ``snap`` is the max-abs clip's
    snapping (for ``method == "max_abs"``, and the window's centre for ``"mse"``).
    """

    method: str
    k: int
    clip: float
    z: int
    mse: float
    max_abs: float
    snap: SnapResult
    candidates: tuple[int, ...]
    mses: tuple[float, ...]


def _observer(data: LogObserver | np.ndarray) -> LogObserver:
    if isinstance(data, LogObserver):
        return data
    obs = LogObserver()
    obs.update(data)
    return obs


def _max_abs_snap(obs: LogObserver, table: ClipTable) -> SnapResult:
    if obs.count == 0:
        raise InvalidInputError("no calibration data: call update() with a batch first")
    if obs.max_abs == 0.0:
        raise InvalidInputError(
            f"all {obs.count} calibration values are zero: max|x| = 0 is not a valid clip and "
            "every clip quantizes zeros exactly; pick the layer's clip from its expected range"
        )
    return snap_clip(obs.max_abs, table)


def select_clip_max_abs(
    data: LogObserver | np.ndarray, table: ClipTable | None = None
) -> ClipChoice:
    """MQBench's rule: ``clip = max|x|``, snapped to the table (``nnie.md`` §7).

    >>> choice = select_clip_max_abs(np.array([3.7, -1.0], np.float32))
    >>> choice.k, round(choice.clip, 6)
    (30, 3.668016)
    """
    obs, table = _observer(data), default_clip_table() if table is None else table
    snap = _max_abs_snap(obs, table)
    mse = float(obs.mse(np.array([snap.k]))[0])
    return ClipChoice(
        "max_abs", snap.k, snap.snapped, snap.k - 127, mse, obs.max_abs, snap, (snap.k,), (mse,)
    )


def select_clip_mse(
    data: LogObserver | np.ndarray,
    below: int = DEFAULT_BELOW,
    above: int = DEFAULT_ABOVE,
    table: ClipTable | None = None,
) -> ClipChoice:
    """Search table clips ``k`` in ``[k0 - below, k0 + above]`` (``k0``: the max-abs ``k``,
    window cut to the table) for the smallest MSE; ties go to the largest ``k`` (less clipping).

    The window contains ``k0``, so the result is never worse than :func:`select_clip_max_abs`.
    """
    for name, value in (("below", below), ("above", above)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise InvalidInputError(f"{name} must be a non-negative integer, got {value!r}")
    obs, table = _observer(data), default_clip_table() if table is None else table
    snap = _max_abs_snap(obs, table)
    ks = np.arange(max(snap.k - below, table.k_min), min(snap.k + above, table.k_max) + 1)
    mses = obs.mse(ks)
    best = int(np.flatnonzero(mses == np.min(mses))[-1])
    k = int(ks[best])
    return ClipChoice(
        "mse",
        k,
        table.clip(k),
        k - 127,
        float(mses[best]),
        obs.max_abs,
        snap,
        tuple(ks.tolist()),
        tuple(mses.tolist()),
    )
