"""TFLite's int8 PRELU: ``Prepare``'s two output multipliers and the reference kernel.

Prepare (LiteRT ``activations.cc: PreluPrepare``; TFLite-Micro ``prelu_common.cc:
CalculatePreluParams``) quantizes two real multipliers with ``QuantizeMultiplier``:

- ``s_in / s_out`` for the positive side (``output_multiplier_1``, ``output_shift_1``);
- ``s_in * s_alpha / s_out`` for the negative side (``output_multiplier_2``, ...).

These are LEAKY_RELU's two multipliers with the slope's scale for ``alpha``, so the derivation
is :func:`~quantemu.backends.tflite.activation_params.leaky_relu_params`'s: LiteRT computes them
in float32 left to right (its operands are the tensors' float scales), TFLite-Micro in double
(the runtime argument picks; checked against both peers on scales where the two differ,
``tools/make_prelu_vectors.py``).

Eval (``reference_ops::BroadcastPrelu4DSlow`` / ``Prelu``, both runtimes)::

    v = x - zp_in
    y = MBQM(v, m1, s1)                       if v >= 0
    y = MBQM(v * (alpha - zp_alpha), m2, s2)  otherwise
    out = clamp(y + zp_out, -128, 127)

with TFLite's double-rounding ``MultiplyByQuantizedMultiplier``; ``alpha`` broadcasts against
``x`` (NumPy's rules, which are ONNX's: a ``(C, 1, 1)`` slope is per channel on NCHW codes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.activation import int8_operand
from quantemu.backends.tflite.activation_params import (
    LeakyReluParams,
    _scale,
    leaky_relu_params,
)
from quantemu.backends.tflite.params import TfliteRuntime, _zero_point
from quantemu.errors import InvalidInputError
from quantemu.intmath import multiply_by_quantized_multiplier_double_rounding

__all__ = ["PreluParams", "prelu_int8", "prelu_params"]

INT8_MIN, INT8_MAX = -128, 127


@dataclass(frozen=True)
class PreluParams(LeakyReluParams):
    """TFLite's ``PreluParams``: LEAKY_RELU's two multipliers (the same Prepare, with the
    slope's scale as ``alpha``) and the slope's zero point (module docstring)."""

    alpha_zero_point: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        _zero_point(self.alpha_zero_point, "alpha_zero_point", "PreluParams")


def prelu_params(
    s_in,
    z_in,
    s_out,
    z_out,
    *,
    s_alpha,
    z_alpha,
    runtime: TfliteRuntime = TfliteRuntime.LITERT_REFERENCE,
) -> PreluParams:
    """PRELU's Prepare for ``runtime``: LEAKY_RELU's ``s_in * alpha / s_out`` and
    ``s_in / s_out``, in the same widths and order, with ``alpha = s_alpha``.

    >>> p = prelu_params(0.05, 0, 0.05, 0, s_alpha=0.01, z_alpha=0)  # 1 = 2**30 * 2**(1 - 31)
    >>> p.multiplier_identity, p.shift_identity, p.multiplier_alpha, p.shift_alpha
    (1073741824, 1, 1374389632, -6)
    """
    where = "prelu_params"
    leaky = leaky_relu_params(
        s_in, z_in, s_out, z_out, _scale(s_alpha, "s_alpha", where), runtime=runtime
    )
    return PreluParams(**vars(leaky), alpha_zero_point=_zero_point(z_alpha, "z_alpha", where))


def prelu_int8(x, alpha, p: PreluParams):
    """PRELU on int8 codes ``x`` with int8 slope codes ``alpha`` broadcast against them.

    Formula: module docstring. ``|v| <= 255`` and ``|alpha - zp_alpha| <= 255``, so the
    negative side's product is below 2**16 and every intermediate fits int64 (MBQM checks
    int32). Counters: ``output_saturated``, outputs clamped to int8.

    >>> p = prelu_params(1.0, 0, 1.0, 0, s_alpha=0.25, z_alpha=0)  # alpha code 1: slope 0.25
    >>> y, c = prelu_int8(np.array([-128, -7, -6, 0, 9, 127]), np.array([1]), p)
    >>> y.tolist(), c  # -7 * 0.25 = -1.75 -> -2; -6 * 0.25 = -1.5 -> -2 (ties away from zero)
    ([-32, -2, -2, 0, 9, 127], {'output_saturated': 0})
    """
    v = int8_operand(x, "prelu_int8") - p.input_zero_point
    a = int8_operand(alpha, "prelu_int8 (alpha)") - p.alpha_zero_point
    try:
        v, a = np.broadcast_arrays(v, a)
    except ValueError:
        raise InvalidInputError(
            f"prelu_int8: alpha of shape {np.shape(alpha)} does not broadcast against x of "
            f"shape {np.shape(x)}"
        ) from None
    pos = v >= 0
    operand = np.where(pos, v, v * a)
    m = np.where(pos, p.multiplier_identity, p.multiplier_alpha)
    s = np.where(pos, p.shift_identity, p.shift_alpha)
    r = np.asarray(multiply_by_quantized_multiplier_double_rounding(operand, m, s), np.int64)
    out = r + p.output_zero_point
    saturated = int(np.count_nonzero((out < INT8_MIN) | (out > INT8_MAX)))
    return np.clip(out, INT8_MIN, INT8_MAX).astype(np.int8), {"output_saturated": saturated}
