"""ADD, SUB and MUL on int8 codes, with NumPy broadcasting (TFLite broadcasts the same way for
operands of equal rank; the caller lays both out in NCHW first)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.elementwise_params import AddParams, MulParams
from quantemu.backends.tflite.output import clamp_counters, requantize_clamp
from quantemu.errors import InvalidInputError, QuantemuError
from quantemu.intmath import multiply_by_quantized_multiplier_double_rounding as mbqm

__all__ = ["add", "mul"]


def _operands(x1, x2, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Both operands as int8 arrays (an int8 dtype proves the range without a scan)."""
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


def _add_raw(a: np.ndarray, b: np.ndarray, params: AddParams) -> np.ndarray:
    shift = 1 << params.left_shift
    a1 = mbqm((a + params.input1_offset) * shift, params.input1_multiplier, params.input1_shift)
    a2 = mbqm((b + params.input2_offset) * shift, params.input2_multiplier, params.input2_shift)
    return a1 - a2 if params.subtract else a1 + a2


def _mul_raw(a: np.ndarray, b: np.ndarray, params: MulParams) -> np.ndarray:
    return (a + params.input1_offset) * (b + params.input2_offset)


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
        raw = _mul_raw(a, b, params) if isinstance(params, MulParams) else _add_raw(a, b, params)
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
    a, b = _operands(x1, x2, "tflite add")
    fast = _by_table(a, b, params)
    if fast is not None:
        return fast
    return _output_stage(_add_raw(a.astype(np.int64), b.astype(np.int64), params), params)


def mul(x1, x2, params: MulParams):
    """int8 MUL: ``(y, counters)``.

    Formula: ``y = clamp(MBQM((x1 + input1_offset) * (x2 + input2_offset), m, s) +
    output_offset, act_min, act_max)``; the product is at most ``255**2``.

    Mirrors: ``reference_integer_ops::Mul`` / ``BroadcastMul4DSlow``.

    >>> from quantemu.backends.tflite.elementwise_params import mul_params
    >>> mul(np.array([3, -3]), np.array([1, 1]), mul_params(0.5, 0, 0.5, 0, 0.5, 0))[0].tolist()
    [2, -1]
    """
    a, b = _operands(x1, x2, "tflite mul")
    fast = _by_table(a, b, params)
    if fast is not None:
        return fast
    return _output_stage(_mul_raw(a.astype(np.int64), b.astype(np.int64), params), params)
