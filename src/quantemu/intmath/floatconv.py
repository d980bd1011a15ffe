"""Float-to-integer conversions exactly as targets perform them.

Each conversion runs in the float width of the target and in its order (DESIGN principle 1):
the rounding step is a float operation of that width, then the integral float is saturated
against exact powers of two (``2**31 - 1`` is not a float32, so comparing with it would be
wrong) and converted. Results are int64 arrays, or Python ints for scalar calls.

Speed (principle 8): NumPy's float-to-int64 cast is scalar code, its float-to-int32 cast is
vectorised; when one min/max shows the results fit int32 they go through int32 (exact: the
values are integral floats in range), otherwise through the int64 cast. float32 widths whose
range lies within ``±2**22`` (int8, int16, ...) round and saturate in float32 and read the
integer from the bits (:func:`_rne_saturate_small`), with no range scan; the one ``min`` scan
that finds NaN also serves the range decisions of the other paths. Those two paths run chunk by
chunk on several cores for large arrays (:mod:`quantemu.intmath.parallel`).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from quantemu.errors import InvalidInputError
from quantemu.intmath._arrays import INT64_MAX
from quantemu.intmath.parallel import map_chunks, splittable
from quantemu.intmath.policies import NanPolicy

__all__ = [
    "float32_round_half_up_add_floor",
    "float32_to_int_round_half_even_saturate",
    "float64_round_half_away_add_truncate",
    "float64_to_int_round_half_away_add_truncate",
]

_SIGN_BIT = np.int64(-(2**63))
_HALF_BITS = np.int64(0x3FE0000000000000)  # the binary64 encoding of +0.5


def _reject(func: str, what: str, remedy: str) -> InvalidInputError:
    return InvalidInputError(f"{func}: x must be {what}; {remedy}")


def _float_operand(x, func: str, dtype) -> tuple[np.ndarray, bool]:
    """``(array of dtype, is_scalar)``; narrower floats are widened (exactly), wider ones must
    hold only values of ``dtype``."""
    name = np.dtype(dtype).name
    if isinstance(x, (bool, np.bool_, numbers.Integral)):
        raise _reject(func, f"{name} values, got the integer {x!r}", "pass floats")
    scalar = isinstance(x, (float, np.floating))
    arr = np.asarray(x)
    if arr.dtype.kind != "f":
        raise _reject(func, f"a {name} array or float, got dtype {arr.dtype}", "pass floats")
    if arr.dtype.itemsize <= np.dtype(dtype).itemsize:
        return arr.astype(dtype, copy=False), scalar
    with np.errstate(over="ignore", invalid="ignore"):
        narrow = arr.astype(dtype)
        bad = (narrow.astype(arr.dtype) != arr) & ~np.isnan(arr)
    if bad.any():
        first = arr[bad].flat[0] if bad.ndim else arr[()]
        raise InvalidInputError(
            f"{func}: x holds {int(np.count_nonzero(bad))} value(s) that are not {name} "
            f"(first {float(first)!r}); the target converts {name} values: cast explicitly, "
            f"e.g. x.astype(np.{name}) (which rounds to nearest even first)"
        )
    return narrow, scalar


def _nan_count_error(func: str, x: np.ndarray, remedy: str) -> InvalidInputError:
    n = int(np.count_nonzero(np.isnan(x)))
    return InvalidInputError(f"{func}: x holds {n} NaN value(s) of {x.size}; {remedy}")


def _saturate_integral(r: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Integral floats (±inf allowed, no NaN) clamped to ``[lo, hi]``, as int64.

    ``lo`` is 0 or ``-2**k``; ``hi + 1`` is a power of two ``<= 2**63``. Both powers are exact
    floats, so the clamp compares exactly; ``hi`` itself may not be a float (``2**31 - 1`` in
    float32), so values are clamped to ``hi + 1`` in float and to ``hi`` after the cast.
    """
    if r.size == 0:
        return np.zeros(r.shape, dtype=np.int64)
    top = hi + 1
    rmin, rmax = float(r.min()), float(r.max())
    over = None
    if rmin < lo or rmax > hi:
        if top > 2**62:  # float(2**63) has no int64 cast: stop one float below, then fix up
            over = r >= float(top)
            upper = np.nextafter(r.dtype.type(top), r.dtype.type(0))
        else:
            upper = float(top)
        r = np.clip(r, float(lo), upper)
        rmin, rmax = max(rmin, float(lo)), min(rmax, float(upper))
    y = _cast(r, rmin, rmax)
    if rmax > hi:
        np.minimum(y, hi, out=y)
    if over is not None:
        y[over] = INT64_MAX
    return y


def _cast(r: np.ndarray, rmin: float, rmax: float) -> np.ndarray:
    """Integral floats in ``[rmin, rmax]`` within int64, cast exactly to int64."""
    if rmin >= -(2.0**31) and rmax < 2.0**31:
        return np.asarray(r.astype(np.int32)).astype(np.int64)
    return np.asarray(r.astype(np.int64))


def float32_to_int_round_half_even_saturate(x, bits: int, *, signed=True, nan=NanPolicy.ERROR):
    """float32 to integer: round half to even, then saturate to ``bits`` bits.

    Formula: ``clamp(rne(x), lo, hi)`` with ``[lo, hi] = [-2**(bits-1), 2**(bits-1) - 1]``
    (``signed``) or ``[0, 2**bits - 1]``; ``rne`` is exact on float32 (every float32 of magnitude
    ``>= 2**23`` is already an integer).

    Policy: ties to even (``0.5 -> 0``, ``1.5 -> 2``, ``-2.5 -> -2``); values beyond the range
    and ``±inf`` saturate. NaN: ``NanPolicy.ERROR`` raises; ``NanPolicy.X86_INDEFINITE`` gives
    ``lo`` (cvtps2dq's integer indefinite ``-2**31`` through a saturating pack: the minimum of a
    signed range, 0 for an unsigned one; only for ``bits <= 32``). ``bits``: 1..64 signed,
    1..63 unsigned. ``x`` must be float32 (scalars or arrays); Python floats and float64 arrays
    are accepted when every value is a float32.

    Mirrors: x86 ``cvtps2dq`` under the default MXCSR (round to nearest even) followed by
    ``packssdw``/``packsswb``/``packuswb``, as oneDNN writes s8/u8/s32 outputs (oneDNN
    saturates before converting, so finite out-of-range values saturate instead of becoming the
    integer indefinite). A whole oneDNN primitive can treat NaN differently (the onednn
    conformance page lists a u8 case giving 255): the backend decides, not this function.

    >>> f = float32_to_int_round_half_even_saturate
    >>> [f(v, 8) for v in (-128.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 127.5)]
    [-128, -2, -2, 0, 0, 2, 2, 127]
    >>> [f(v, 8, signed=False) for v in (-1.5, 127.5, 255.5, float("inf"))]
    [0, 128, 255, 255]
    >>> [f(v, 32) for v in (2.0**31, -2.0**31, float("-inf"))]
    [2147483647, -2147483648, -2147483648]
    >>> f(float("nan"), 8, nan=NanPolicy.X86_INDEFINITE)
    -128
    """
    func = "float32_to_int_round_half_even_saturate"
    lo, hi = _range(signed, bits, func)
    if not isinstance(nan, NanPolicy):
        raise InvalidInputError(f"{func}: nan must be a NanPolicy member, got {nan!r}")
    if nan is NanPolicy.X86_INDEFINITE and bits > 32:
        raise InvalidInputError(
            f"{func}: NanPolicy.X86_INDEFINITE is cvtps2dq's 32-bit rule, bits = {bits} > 32; "
            "use bits <= 32 or NanPolicy.ERROR"
        )
    xa, scalar = _float_operand(x, func, np.float32)
    xa, xmin = _f32_nan_policy(xa, lo, nan, func)
    if lo >= -(2**22) and hi < 2**22:
        y = _rne_saturate_small(xa, lo, hi)
    else:
        y = _rne_saturate_wide(xa, lo, hi, xmin)
    return int(y[()]) if scalar else y


def _f32_nan_policy(xa: np.ndarray, lo: int, nan: NanPolicy, func: str):
    """``(xa, min(xa))`` with the NaN policy applied; one ``min`` scan finds NaN (it propagates
    through ``min``), and the minimum is reused for the range decisions."""
    xmin = float(xa.min()) if xa.size else 0.0
    if not math.isnan(xmin):
        return xa, xmin
    if nan is NanPolicy.ERROR:
        raise _nan_count_error(
            func, xa, "pass nan=NanPolicy.X86_INDEFINITE for the x86 rule, or clean the data"
        )
    xa = np.where(np.isnan(xa), np.float32(lo), xa)  # lo is 0 or -2**k: exact in float32
    return xa, float(xa.min())


# 1.5 * 2**23 and its binary32 encoding: from 2**23 to 2**24 binary32 values are the integers.
_F32_MAGIC = np.float32(1.5 * 2**23)
_F32_MAGIC_BITS = np.int32(0x4B400000)


def _rne_saturate_small(xa: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """``clamp(rne(x), lo, hi)`` for float32 ``x`` without NaN, when ``-2**22 <= lo`` and
    ``hi < 2**22``: one float32 addition rounds, a float32 clip saturates, no range scan.

    Exact. Let ``M = 1.5 * 2**23`` and ``t = fl32(x + M)``. For ``|x| <= 2**22`` the exact sum
    lies in ``[2**23, 2**24]``, where binary32 values are the integers: the addition (IEEE round
    to nearest even, NumPy's default) gives ``M + rne(x)`` (``M`` is even, so ties stay even).
    For ``x > 2**22``, ``t >= M + 2**22 > M + hi`` because ``fl32`` is non-decreasing; likewise
    ``x < -2**22`` gives ``t <= M - 2**22 <= M + lo``; ``±inf`` stay ``±inf``. So clipping ``t``
    to ``[M + lo, M + hi]`` (exact integers of the binade) gives ``M + clamp(rne(x), lo, hi)``
    in every case. In ``[2**23, 2**24)`` the encoding is ``bits(v) = bits(2**23) + (v - 2**23)``,
    hence ``bits(t) - bits(M) = clamp(rne(x), lo, hi)``, in int32 without overflow.
    """
    out = np.empty(xa.shape, dtype=np.int64)
    if splittable(xa):
        map_chunks(lambda o, xc: _rne_saturate_small_into(o, xc, lo, hi), out, xa)
    else:
        _rne_saturate_small_into(out, xa, lo, hi)
    return out


def _rne_saturate_small_into(out: np.ndarray, xa: np.ndarray, lo: int, hi: int) -> None:
    t = np.add(xa, _F32_MAGIC, out=np.empty(xa.shape, dtype=np.float32))
    np.clip(t, np.float32(_F32_MAGIC + lo), np.float32(_F32_MAGIC + hi), out=t)
    k = t.view(np.int32)
    k -= _F32_MAGIC_BITS
    out[...] = k


def _rne_saturate_wide(xa: np.ndarray, lo: int, hi: int, xmin: float) -> np.ndarray:
    """``clamp(rne(x), lo, hi)`` for float32 ``x`` without NaN (``xmin = min(x)``), any range."""
    rmin = float(np.rint(np.float32(xmin)))
    rmax = float(np.rint(xa.max())) if xa.size else 0.0  # rint is non-decreasing
    if rmin >= -(2.0**31) and rmax < 2.0**31:
        out = np.empty(xa.shape, dtype=np.int32)
        np.rint(xa, out=out, casting="unsafe")  # integral float32 within int32: exact cast
        return _clip_int32(out, lo, hi, rmin, rmax).astype(np.int64)
    return _saturate_integral(np.asarray(np.rint(xa)), lo, hi)


def _clip_int32(out: np.ndarray, lo: int, hi: int, rmin: float, rmax: float) -> np.ndarray:
    """Clamp int32 ``out`` (values in ``[rmin, rmax]``) to ``[lo, hi]`` in place when needed."""
    if rmin < lo or rmax > hi:
        np.clip(out, max(lo, -(2**31)), min(hi, 2**31 - 1), out=out)
    return out


def _range(signed, bits, func: str) -> tuple[int, int]:
    if not isinstance(signed, (bool, np.bool_)):
        raise InvalidInputError(f"{func}: signed must be True or False, got {signed!r}")
    high = 64 if signed else 63
    if isinstance(bits, (bool, np.bool_)) or not isinstance(bits, numbers.Integral):
        raise InvalidInputError(f"{func}: bits must be an int in [1, {high}], got {bits!r}")
    if not 1 <= bits <= high:
        raise InvalidInputError(
            f"{func}: bits = {bits} is outside [1, {high}] for signed={bool(signed)}; results are "
            "int64, so unsigned widths stop at 63"
        )
    bits = int(bits)
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def float64_to_int_round_half_away_add_truncate(x, *, bits: int = 64):
    """float64 to integer the way NVDLA's C model does it: add ±0.5 in double, truncate.

    Formula: ``clamp(trunc(fl(x + 0.5)), lo, hi)`` for ``x >= 0`` and
    ``clamp(trunc(fl(x - 0.5)), lo, hi)`` for ``x < 0``, where ``fl`` is the IEEE binary64 add
    (round to nearest even) and ``[lo, hi]`` is the ``bits``-bit two's-complement range.

    Policy: meant as round half away from zero, but the ``±0.5`` add itself rounds, and that
    artifact is the semantics: ``0.49999999999999994 + 0.5 == 1.0`` gives 1, and from ``2**52``
    up (doubles there are integers spaced by 1 or more, so ``x + 0.5`` is a tie of the add) the
    add rounds to even, e.g. ``2**52 + 1`` gives ``2**52 + 2``. Values beyond the range and
    ``±inf`` saturate (the C cast would be undefined beyond int64; here it saturates). NaN is an
    error. ``bits`` in ``[1, 64]``. ``x`` must be float64, or a narrower float (widened exactly).

    Mirrors: the NVDLA cmod's ``(int64_t)(x >= 0 ? x + 0.5 : x - 0.5)`` conversions in the CDP
    and PDP (nvdla conformance page, "double precision").

    >>> f = float64_to_int_round_half_away_add_truncate
    >>> [f(v) for v in (-2.5, -1.5, -0.5, -0.49999999999999994, 0.5, 1.5, 2.5)]
    [-3, -2, -1, -1, 1, 2, 3]
    >>> [f(v) for v in (0.49999999999999994, 2.0**52 + 1, -(2.0**52) - 1)]
    [1, 4503599627370498, -4503599627370498]
    >>> [f(v, bits=8) for v in (-128.5, 127.4, 127.5, float("inf"))]
    [-128, 127, 127, 127]
    >>> [f(v) for v in (2.0**63, -(2.0**63), -(2.0**64))]
    [9223372036854775807, -9223372036854775808, -9223372036854775808]
    """
    func = "float64_to_int_round_half_away_add_truncate"
    lo, hi = _range(True, bits, func)
    xa, scalar = _float_operand(x, func, np.float64)
    xmin = float(xa.min()) if xa.size else 0.0  # NaN propagates: one scan finds it
    if math.isnan(xmin):
        raise _nan_count_error(func, xa, "the NVDLA model has no NaN rule: clean the data first")
    # The C model is non-decreasing in x: its extremes come from those of x.
    tmin = _add_half_truncate(xmin)
    tmax = _add_half_truncate(xa.max()) if xa.size else 0.0
    if tmin >= -(2.0**31) and tmax < 2.0**31:
        y = np.empty(xa.shape, dtype=np.int64)
        limits = (lo, hi, tmin, tmax)
        if splittable(xa):
            map_chunks(lambda o, xc: _add_half_truncate_into(o, xc, limits), y, xa)
        else:
            _add_half_truncate_into(y, xa, limits)
    else:
        t = _add_half(xa, np.empty(xa.shape, dtype=np.float64))
        y = _saturate_integral(np.trunc(t, out=t), lo, hi)
    return int(y[()]) if scalar else y


def _add_half(xa: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``t = x + (x >= 0 ? +0.5 : -0.5)``, the rounded binary64 add the C model performs.

    The half's sign is taken from x's sign bit (-0.0 gets -0.5, C gives it +0.5: both truncate
    to 0), built in ``t``'s bits so that no second buffer is needed.
    """
    bits_t = t.view(np.int64)
    np.bitwise_and(xa.view(np.int64), _SIGN_BIT, out=bits_t)
    bits_t |= _HALF_BITS
    t += xa
    return t


def _add_half_truncate_into(out, xa, limits: tuple[int, int, float, float]) -> None:
    """The C model into int64 ``out`` when every truncated value is within int32: the add in
    ``out``'s buffer read as binary64, then C's truncation through int32 (vectorised, exact).
    ``limits``: ``(lo, hi, tmin, tmax)`` for :func:`_clip_int32`."""
    t = _add_half(xa, out.view(np.float64))
    i32 = _clip_int32(t.astype(np.int32), *limits)
    np.copyto(out, i32)  # widen into the same buffer (t is no longer needed)


def _add_half_truncate(v) -> float:
    """The C model on one double (non-decreasing in ``v``); Python floats are binary64."""
    v = float(v)
    return float(np.trunc(v + 0.5 if v >= 0 else v - 0.5))


# --- rounding that stays in float (parameter derivation) --------------------------------------


def _real_operand(x, func: str, dtype) -> np.ndarray:
    """``x`` as an array of ``dtype``: floats as :func:`_float_operand`, integers converted as
    C converts them (rounded to nearest), bools rejected."""
    if isinstance(x, (bool, np.bool_)):
        raise _reject(func, "a float or integer value, got a bool", "pass numbers")
    arr = np.asarray(x)
    if arr.dtype.kind in "iu" or arr.dtype == object:
        return np.asarray(x, dtype=dtype)
    return _float_operand(arr, func, dtype)[0]


def float64_round_half_away_add_truncate(x):
    """float64 rounded half away from zero as C's ``trunc(x +- 0.5)``, kept as float64.

    Formula: ``trunc(fl(x + 0.5))`` for ``x >= 0`` and ``trunc(fl(x - 0.5))`` for ``x < 0``, where
    ``fl`` is the IEEE binary64 add (round to nearest even); equal to
    ``sign(x) * floor(fl(|x| + 0.5))``, the same add mirrored.

    Policy: ties away from zero (``-2.5 -> -3``, ``2.5 -> 3``). The ``+-0.5`` add rounds, and
    that is kept: ``0.49999999999999994 -> 1`` and from ``2**52`` up the add rounds to even
    (``2**52 + 1 -> 2**52 + 2``). Exact for every float32 ``x`` (``x + 0.5`` is then exact in
    binary64). No saturation and no cast: ``+-inf`` and NaN pass through, the caller clamps and
    converts. Floats narrower than float64 and integers are converted to float64 first (an
    integer beyond ``2**53`` rounds there, as C's conversion does). Returns float64 (an array,
    or a NumPy float64 for a scalar). The integer-result twin, saturated, is
    :func:`float64_to_int_round_half_away_add_truncate`.

    Mirrors: ``std::round`` / ``TfLiteRound`` as TFLite's converter and reference kernels derive
    quantization parameters (``zero_point``, weight and bias codes, QUANTIZE), and the
    ``floor(|v| + 0.5)`` with sign of NVIDIA's NVDLA compiler (converter offsets, padding values).

    >>> f = float64_round_half_away_add_truncate
    >>> [float(f(v)) for v in (-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 127.5)]
    [-3.0, -2.0, -1.0, 1.0, 2.0, 3.0, 128.0]
    >>> [float(f(v)) for v in (0.49999999999999994, 2.0**52 + 1, -(2.0**52) - 1, 0.49999997)]
    [1.0, 4503599627370498.0, -4503599627370498.0, 0.0]
    >>> f(np.array([np.float32(0.49999997), -np.inf, 7])).tolist()
    [0.0, -inf, 7.0]
    """
    xa = _real_operand(x, "float64_round_half_away_add_truncate", np.float64)
    return np.trunc(xa + np.copysign(0.5, xa))


def float32_round_half_up_add_floor(x):
    """float32 rounded half up as C's ``floorf(x + 0.5f)``, kept as float32.

    Formula: ``floor(fl32(x + 0.5))``, where ``fl32`` is the IEEE binary32 add (round to nearest
    even).

    Policy: ties toward +inf (``-2.5 -> -2``, ``2.5 -> 3``), but the add rounds in float32 and
    that is kept: ``0.49999997 -> 1`` (``0.49999997 + 0.5`` rounds up to 1), and from ``2**23``
    up odd integers gain 1 (``2**23 + 1 -> 2**23 + 2``). No saturation and no cast: ``+-inf`` and
    NaN pass through. Float16 and integers are converted to float32 first; a wider float must
    hold float32 values (else an error: cast it explicitly). Returns float32 (an array, or a
    NumPy float32 for a scalar).

    Mirrors: NVIDIA's NVDLA compiler (``floor(x / scale + 0.5f)`` in float32), which quantizes
    weights and int32 biases this way.

    >>> f = float32_round_half_up_add_floor
    >>> [float(f(v)) for v in (-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -127.5)]
    [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0, -127.0]
    >>> [float(f(np.float32(v))) for v in (0.49999997, 2.0**23 + 1, -(2.0**23) - 1)]
    [1.0, 8388610.0, -8388608.0]
    """
    xa = _real_operand(x, "float32_round_half_up_add_floor", np.float32)
    return np.floor(xa + np.float32(0.5))
