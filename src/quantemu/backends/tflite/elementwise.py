"""ADD, SUB and MUL on int8 codes, with NumPy broadcasting (TFLite broadcasts the same way for
operands of equal rank; the caller lays both out in NCHW first)."""

from __future__ import annotations

import numpy as np

from quantemu.backends.tflite.output import requantize_clamp
from quantemu.backends.tflite.params import AddParams, MulParams
from quantemu.errors import InvalidInputError
from quantemu.intmath import multiply_by_quantized_multiplier_double_rounding as mbqm

__all__ = ["add", "mul"]


def _operands(x1, x2, where: str) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(x1), np.asarray(x2)
    for name, v in (("x1", a), ("x2", b)):
        if v.dtype.kind not in "iu" or (v.size and (v.min() < -128 or v.max() > 127)):
            raise InvalidInputError(f"{where}: {name} must hold int8 codes, got {v.dtype}")
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise InvalidInputError(
            f"{where}: shapes {a.shape} and {b.shape} do not broadcast"
        ) from None
    return a.astype(np.int64), b.astype(np.int64)


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


def add(x1, x2, params: AddParams):
    """int8 ADD (and SUB, through its parameters): ``(y, counters)``.

    Formula: ``a_i = MBQM((x_i + input_i_offset) * 2**20, m_i, s_i)`` (``s_i <= 0``), ``raw =
    a_1 + a_2`` (``a_1 - a_2`` when ``params.subtract``), ``y = clamp(MBQM(raw, m_out, s_out) +
    output_offset, act_min, act_max)``.

    Policy: every step rounds twice (ties up, then away from zero); ``|x + offset| * 2**20 <
    2**28`` and ``|raw| < 2**29``: no int32 overflow.

    Mirrors: ``reference_integer_ops::Add`` / ``BroadcastAdd4DSlow`` and ``reference_ops::Sub``
    / ``BroadcastQuantSubSlow`` (the SUB both peers run, see :func:`.params.sub_params`).

    >>> from quantemu.backends.tflite.params import add_params
    >>> p = add_params(0.5, 0, 0.25, 0, 1.0, 0)
    >>> add(np.array([1, 3, -3]), np.array([2, 2, 2]), p)[0].tolist()  # 0.5 + 0.5, 1.5 + 0.5, ...
    [1, 2, -1]
    """
    a, b = _operands(x1, x2, "tflite add")
    shift = 1 << params.left_shift
    a1 = mbqm((a + params.input1_offset) * shift, params.input1_multiplier, params.input1_shift)
    a2 = mbqm((b + params.input2_offset) * shift, params.input2_multiplier, params.input2_shift)
    raw = a1 - a2 if params.subtract else a1 + a2
    return _output_stage(raw, params)


def mul(x1, x2, params: MulParams):
    """int8 MUL: ``(y, counters)``.

    Formula: ``y = clamp(MBQM((x1 + input1_offset) * (x2 + input2_offset), m, s) +
    output_offset, act_min, act_max)``; the product is at most ``255**2``.

    Mirrors: ``reference_integer_ops::Mul`` / ``BroadcastMul4DSlow``.

    >>> from quantemu.backends.tflite.params import mul_params
    >>> mul(np.array([3, -3]), np.array([1, 1]), mul_params(0.5, 0, 0.5, 0, 0.5, 0))[0].tolist()
    [2, -1]
    """
    a, b = _operands(x1, x2, "tflite mul")
    prod = (a + params.input1_offset) * (b + params.input2_offset)
    return _output_stage(prod, params)
