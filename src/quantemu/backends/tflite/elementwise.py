"""TFLite's two-input int8 arithmetic: ADD, SUB, MUL and SQUARED_DIFFERENCE, with NumPy
broadcasting (TFLite broadcasts the same way for operands of equal rank; the caller lays both
out in NCHW first). Their Prepare is :mod:`quantemu.backends.tflite.elementwise_params`.

ADD, SUB and SQUARED_DIFFERENCE share ADD's input stage (both operands onto a common scale,
:func:`rescaled_inputs`); MUL multiplies the offset codes. LiteRT BUILTIN_REF and TFLite-Micro
run the same arithmetic for all four (``elementwise_peer_vectors.json`` holds both peers'
SQUARED_DIFFERENCE).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.elementwise_params import (
    SQDIFF_LEFT_SHIFT,
    AddParams,
    MulParams,
    SquaredDifferenceParams,
)
from quantemu.backends.tflite.output import clamp_counters, requantize_clamp
from quantemu.errors import InvalidInputError, QuantemuError
from quantemu.intmath import multiply_by_quantized_multiplier_double_rounding as mbqm
from quantemu.intmath import reference as ref

__all__ = [
    "add",
    "int8_operands",
    "mul",
    "rescaled_inputs",
    "squared_difference_int8",
    "squared_difference_reference",
]

INT8_MIN, INT8_MAX = -128, 127


def int8_operands(x1, x2, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Both operands of a two-input kernel as int8 arrays whose shapes broadcast together (an
    int8 dtype proves the range without a scan); anything else is an error naming ``where``."""
    a, b = np.asarray(x1), np.asarray(x2)
    for name, v in (("x1", a), ("x2", b)):
        if v.dtype == np.int8:
            continue
        if v.dtype.kind not in "iu" or (v.size and (v.min() < -128 or v.max() > 127)):
            raise InvalidInputError(f"{where}: {name} must hold int8 codes, got {v.dtype}")
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise InvalidInputError(
            f"{where}: shapes {a.shape} and {b.shape} do not broadcast"
        ) from None
    return a.astype(np.int8, copy=False), b.astype(np.int8, copy=False)


def _output_stage(raw, params: AddParams | MulParams):
    """The requantization and fused-activation clamp ADD, SUB and MUL end with."""
    return requantize_clamp(
        raw,
        params.output_multiplier,
        params.output_shift,
        params.output_offset,
        act_min=params.act_min,
        act_max=params.act_max,
        floor=params.floor,
        ceiling=params.ceiling,
    )


def rescaled_inputs(a: np.ndarray, b: np.ndarray, params, left_shift: int):
    """ADD's input stage (SUB's and SQUARED_DIFFERENCE's too), on int64 codes:
    ``a_i = MBQM((x_i + input_i_offset) * 2**left_shift, m_i, s_i)``; ``(a_1, a_2)``.

    >>> from quantemu.backends.tflite.elementwise_params import add_params
    >>> p = add_params(0.5, 0, 0.25, 0, 1.0, 0)  # onto twice_max = 1: x1 / 2, x2 / 4
    >>> [v.tolist() for v in rescaled_inputs(np.array([4]), np.array([4]), p, 20)]
    [[2097152], [1048576]]
    """
    shift = 1 << left_shift
    a1 = mbqm((a + params.input1_offset) * shift, params.input1_multiplier, params.input1_shift)
    a2 = mbqm((b + params.input2_offset) * shift, params.input2_multiplier, params.input2_shift)
    return a1, a2


def _add_raw(a: np.ndarray, b: np.ndarray, params: AddParams) -> np.ndarray:
    a1, a2 = rescaled_inputs(a, b, params, params.left_shift)
    return a1 - a2 if params.subtract else a1 + a2


def _mul_raw(a: np.ndarray, b: np.ndarray, params: MulParams) -> np.ndarray:
    return (a + params.input1_offset) * (b + params.input2_offset)


def _raw(a: np.ndarray, b: np.ndarray, params: AddParams | MulParams) -> np.ndarray:
    """What the output stage requantizes: the rescaled sum (difference) or the product."""
    return _mul_raw(a, b, params) if isinstance(params, MulParams) else _add_raw(a, b, params)


TABLE_MIN_SIZE = 1 << 14  # below this many outputs the direct arithmetic is as cheap


@dataclass(frozen=True)
class _Table:
    """Every output of a binary kernel, indexed by ``x1`` and ``x2`` read as uint8.

    ``y``: the 65536 outputs; ``low`` / ``high``: which pairs the clamp moved (the counters);
    ``count_low`` / ``count_high``: whether ``y == act_min`` (``act_max``) alone says so (no
    pair lands on the bound unclamped), saving the flag lookup."""

    y: np.ndarray
    low: np.ndarray
    high: np.ndarray
    count_low: bool
    count_high: bool


@functools.lru_cache(maxsize=64)
def _table(params: AddParams | MulParams) -> _Table | None:
    """The kernel's step-by-step arithmetic on all 256 x 256 code pairs, or None where some
    pair is outside its domain (the direct path then raises only for pairs that occur)."""
    codes = np.arange(256, dtype=np.uint8).view(np.int8).astype(np.int64)
    a, b = codes[:, None], codes[None, :]
    try:
        raw = _raw(a, b, params)
        v = mbqm(raw, params.output_multiplier, params.output_shift) + params.output_offset
    except QuantemuError:
        return None
    lo, hi = params.act_min, params.act_max
    y = np.clip(v, lo, hi).astype(np.int8).ravel()
    y.setflags(write=False)
    low, high = (v < lo).ravel(), (v > hi).ravel()
    return _Table(y, low, high, not (v == lo).any(), not (v == hi).any())


def _by_table(a: np.ndarray, b: np.ndarray, params: AddParams | MulParams):
    """``(y, counters)`` by table lookup, or None where no table applies."""
    if max(a.size, b.size) < TABLE_MIN_SIZE or (table := _table(params)) is None:
        return None
    idx = np.left_shift(a.view(np.uint8), 8, dtype=np.uint16)
    same = idx.shape == np.broadcast_shapes(a.shape, b.shape)
    idx = np.bitwise_or(idx, b.view(np.uint8), out=idx if same else None)
    y = np.take(table.y, idx)
    lo, hi = params.act_min, params.act_max
    n_low = np.count_nonzero(y == lo if table.count_low else np.take(table.low, idx))
    n_high = np.count_nonzero(y == hi if table.count_high else np.take(table.high, idx))
    counters = clamp_counters(
        int(n_low), int(n_high), lo, hi, floor=params.floor, ceiling=params.ceiling
    )
    return y, counters


def _arithmetic(x1, x2, params: AddParams | MulParams, where: str):
    """ADD, SUB or MUL (by ``params``): by table where one applies, else step by step."""
    a, b = int8_operands(x1, x2, where)
    fast = _by_table(a, b, params)
    if fast is not None:
        return fast
    return _output_stage(_raw(a.astype(np.int64), b.astype(np.int64), params), params)


def add(x1, x2, params: AddParams):
    """int8 ADD (and SUB, through its parameters): ``(y, counters)``.

    Formula: ``a_i = MBQM((x_i + input_i_offset) * 2**20, m_i, s_i)`` (``s_i <= 0``), ``raw =
    a_1 + a_2`` (``a_1 - a_2`` when ``params.subtract``), ``y = clamp(MBQM(raw, m_out, s_out) +
    output_offset, act_min, act_max)``.

    Policy: every step rounds twice (ties up, then away from zero); ``|x + offset| * 2**20 <
    2**28`` and ``|raw| < 2**29``: no int32 overflow.

    Mirrors: ``reference_integer_ops::Add`` / ``BroadcastAdd4DSlow`` and ``reference_ops::Sub``
    / ``BroadcastQuantSubSlow`` (the SUB both peers run, see
    :func:`.elementwise_params.sub_params`).

    >>> from quantemu.backends.tflite.elementwise_params import add_params
    >>> p = add_params(0.5, 0, 0.25, 0, 1.0, 0)
    >>> add(np.array([1, 3, -3]), np.array([2, 2, 2]), p)[0].tolist()  # 0.5 + 0.5, 1.5 + 0.5, ...
    [1, 2, -1]
    """
    return _arithmetic(x1, x2, params, "tflite add")


def mul(x1, x2, params: MulParams):
    """int8 MUL: ``(y, counters)``.

    Formula: ``y = clamp(MBQM((x1 + input1_offset) * (x2 + input2_offset), m, s) +
    output_offset, act_min, act_max)``; the product is at most ``255**2``.

    Mirrors: ``reference_integer_ops::Mul`` / ``BroadcastMul4DSlow``.

    >>> from quantemu.backends.tflite.elementwise_params import mul_params
    >>> mul(np.array([3, -3]), np.array([1, 1]), mul_params(0.5, 0, 0.5, 0, 0.5, 0))[0].tolist()
    [2, -1]
    """
    return _arithmetic(x1, x2, params, "tflite mul")


def squared_difference_int8(x1, x2, p: SquaredDifferenceParams):
    """int8 SQUARED_DIFFERENCE with NumPy broadcasting: ``(y, counters)``.

    Formula: ``a_i = MBQM((x_i + input_i_offset) * 2**7, m_i, s_i)``, ``d = a_1 - a_2``,
    ``y = clamp(MBQM(d * d, m_out, s_out) + output_offset, -128, 127)``.

    Policy: every MBQM rounds twice (ties up, then away from zero); ``|a_i| <= 255 * 2**6`` so
    ``d * d < 2**30``: no int32 overflow. ``output_saturated`` counts clamped outputs.

    Mirrors: ``SquaredDifference(T, T, const ArithmeticParams&)`` of TFLite-Micro's
    ``squared_difference.cc`` and LiteRT's, with ``ElementWise`` /
    ``BroadcastBinaryFunction4DSlow``.

    >>> from quantemu.backends.tflite.elementwise_params import squared_difference_params
    >>> p = squared_difference_params(0.5, 0, 0.5, 0, 0.25, -128)
    >>> squared_difference_int8(np.array([4, -2, 0]), np.array([2, 2, 0]), p)[0].tolist()
    [-124, -112, -128]
    """
    a, b = int8_operands(x1, x2, "squared_difference_int8")
    a1, a2 = rescaled_inputs(a.astype(np.int64), b.astype(np.int64), p, SQDIFF_LEFT_SHIFT)
    d = np.asarray(a1, np.int64) - np.asarray(a2, np.int64)
    y, counters = requantize_clamp(d * d, p.output_multiplier, p.output_shift, p.output_offset)
    return y, {"output_saturated": counters["output_saturated"]}


def squared_difference_reference(a: int, b: int, p: SquaredDifferenceParams) -> int:
    """The Python-int twin of :func:`squared_difference_int8`, one element."""
    shift = 1 << SQDIFF_LEFT_SHIFT
    a1 = ref.multiply_by_quantized_multiplier_double_rounding(
        (a + p.input1_offset) * shift, p.input1_multiplier, p.input1_shift
    )
    a2 = ref.multiply_by_quantized_multiplier_double_rounding(
        (b + p.input2_offset) * shift, p.input2_multiplier, p.input2_shift
    )
    raw = ref.multiply_by_quantized_multiplier_double_rounding(
        (a1 - a2) * (a1 - a2), p.output_multiplier, p.output_shift
    )
    return min(max(raw + p.output_offset, INT8_MIN), INT8_MAX)
