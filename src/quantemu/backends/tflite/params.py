"""TFLite's Prepare-time parameters: integer multipliers, shifts and clamp ranges from the
float32 scales, computed in the float width and order TFLite's ``Prepare`` functions use.
LiteRT's reference kernels and TFLite-Micro agree on every operator here (checked against both
interpreters); :class:`TfliteRuntime` names them for the operators where they do not.

Each ``*_params`` function rounds the scales to float32 (what a TFLite model stores; a scale
read from a model is unchanged) and returns a frozen, validated dataclass that the kernels of
this package consume. Here: what the kernels share (the runtimes, rounding, fused activations
and their clamp fields, the quantization a two-input Prepare starts from) and the parameters of
CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, the pools, QUANTIZE and MEAN. The two-input
arithmetic's are in :mod:`.elementwise_params`, the activations' in :mod:`.activation_params`;
BATCH_MATMUL, RSQRT and GELU keep theirs beside their kernels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum

import numpy as np

from quantemu.backends.tflite.multiplier import (
    quantize_multiplier,
    quantize_multiplier_greater_than_one,
    quantize_multiplier_smaller_than_one_exp,
)
from quantemu.errors import InvalidInputError

__all__ = [
    "ConvParams",
    "FusedActivation",
    "MeanParams",
    "MultiplierRounding",
    "PoolParams",
    "RequantizeParams",
    "TfliteRuntime",
    "TwoInputQuantization",
    "activation_range",
    "conv_params",
    "fully_connected_params",
    "fused_activation_clamp",
    "mean_params",
    "pool_params",
    "quantize_multiplier",
    "quantize_multiplier_greater_than_one",
    "quantize_multiplier_smaller_than_one_exp",
    "requantize_params",
    "two_input_quantization",
]

INT8_MIN, INT8_MAX = -128, 127
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class TfliteRuntime(Enum):
    """Which implementation of TFLite's reference kernels: they differ for a few operators."""

    LITERT_REFERENCE = "litert_reference"  # ai_edge_litert with OpResolverType.BUILTIN_REF
    TFLITE_MICRO = "tflite_micro"  # TFLite-Micro's reference kernels


class MultiplierRounding(Enum):
    """How an output stage applies ``(m, shift)``: ``x * m * 2**(shift - 31)`` rounded..."""

    #: ...twice: gemmlowp's doubling high multiply (ties up), then ``RoundingDivideByPOT``
    #: (ties away): TFLite's default ``MultiplyByQuantizedMultiplier``.
    DOUBLE = "double"
    #: ...once, ties toward +inf: ``(x * m + 2**(30 - shift)) >> (31 - shift)`` (ruy's and
    #: ``TFLITE_SINGLE_ROUNDING``'s form), what LiteRT's reference FULLY_CONNECTED computes.
    SINGLE_HALF_UP = "single_half_up"


class FusedActivation(Enum):
    """TFLite's ``ActivationFunctionType`` values that int8 kernels clamp to."""

    NONE = "NONE"
    RELU = "RELU"
    RELU_N1_TO_1 = "RELU_N1_TO_1"
    RELU6 = "RELU6"


def _f32(value, name: str, where: str) -> float:
    """``value`` rounded to float32, as a TFLite model stores a scale (exact for a scale read
    from a model); must be positive and finite."""
    v = float(np.float32(value))
    if not math.isfinite(v) or v <= 0:
        raise InvalidInputError(
            f"{where}: {name} = {value!r} must be a positive, finite float32 scale"
        )
    return v


def _zero_point(value, name: str, where: str) -> int:
    z = int(value)
    if z != value or not INT8_MIN <= z <= INT8_MAX:
        raise InvalidInputError(f"{where}: {name} = {value!r} must be an int8 zero point")
    return z


def _round_half_away_f32(v: np.float32) -> int:
    """``std::round`` of a float32 (a float32 plus 0.5 is exact in double)."""
    x = float(v)
    return math.trunc(x + 0.5 if x >= 0 else x - 0.5)


def activation_range(act: FusedActivation, scale, zero_point) -> tuple[int, int]:
    """``CalculateActivationRangeQuantized`` for an int8 output: ``(act_min, act_max)``.

    Formula: ``quantize(f) = zero_point + round(f / scale)`` with the division in float32 and
    ``round`` half away from zero; RELU gives ``[max(-128, quantize(0)), 127]``, RELU6
    ``[max(-128, quantize(0)), min(127, quantize(6))]``, RELU_N1_TO_1 ``[max(-128,
    quantize(-1)), min(127, quantize(1))]``, NONE ``[-128, 127]``.

    Policy: a quotient beyond int32 is undefined behaviour in TFLite's C++; here it just clamps.

    Mirrors: ``tflite::CalculateActivationRangeQuantized`` (kernels/kernel_util.cc).

    >>> activation_range(FusedActivation.RELU6, 6 / 255, -128)
    (-128, 127)
    >>> activation_range(FusedActivation.RELU_N1_TO_1, 0.5, 3)
    (1, 5)
    """
    act = FusedActivation(act)
    s = np.float32(scale)
    z = int(zero_point)

    def quantize(f: float) -> int:
        return z + _round_half_away_f32(np.float32(f) / s)

    if act is FusedActivation.NONE:
        return INT8_MIN, INT8_MAX
    if act is FusedActivation.RELU:
        return max(INT8_MIN, quantize(0.0)), INT8_MAX
    if act is FusedActivation.RELU6:
        return max(INT8_MIN, quantize(0.0)), min(INT8_MAX, quantize(6.0))
    return max(INT8_MIN, quantize(-1.0)), min(INT8_MAX, quantize(1.0))


def fused_activation_clamp(act, s_out, z_out) -> dict[str, int | bool]:
    """The clamp fields of a kernel's parameters for its fused activation ``act``:
    ``act_min``, ``act_max`` (:func:`activation_range`), and ``floor`` / ``ceiling``, whether
    the activation set that bound (a clamp there is the activation's, not a loss).

    >>> fused_activation_clamp(FusedActivation.RELU, 0.5, -128)
    {'act_min': -128, 'act_max': 127, 'floor': True, 'ceiling': False}
    """
    act = FusedActivation(act)
    act_min, act_max = activation_range(act, s_out, z_out)
    bounded = act in (FusedActivation.RELU6, FusedActivation.RELU_N1_TO_1)
    floor = act is not FusedActivation.NONE
    return {"act_min": act_min, "act_max": act_max, "floor": floor, "ceiling": bounded}


def _check_range(lo: int, hi: int, where: str) -> None:
    if not INT8_MIN <= lo <= hi <= INT8_MAX:
        raise InvalidInputError(
            f"{where}: activation range [{lo}, {hi}] must be ordered and inside int8 [-128, 127]"
        )


def _check_multiplier(q: int, shift: int, where: str, name: str = "multiplier") -> None:
    if not (INT32_MIN <= q <= INT32_MAX and -31 <= shift <= 31):
        raise InvalidInputError(
            f"{where}: {name} {q} (shift {shift}) must be an int32 with shift in [-31, 31]; "
            "build it with quantize_multiplier"
        )


@dataclass(frozen=True)
class ConvParams:
    """CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED output stage, one entry per output channel
    (one entry in all for a per-tensor FULLY_CONNECTED): ``y = clamp(MBQM(acc, m[c], s[c]) +
    output_offset, act_min, act_max)`` with ``acc = sum (x + input_offset) * w + bias``."""

    input_offset: int  # -z_in
    output_offset: int  # z_out
    multipliers: tuple[int, ...]
    shifts: tuple[int, ...]
    act_min: int = INT8_MIN
    act_max: int = INT8_MAX
    # Whether act_min / act_max come from a fused activation (a ReLU at zero point -128 sets
    # act_min to the rail itself): the clamps there count as activation_clamped, not lost.
    floor: bool = False
    ceiling: bool = False
    rounding: MultiplierRounding = MultiplierRounding.DOUBLE

    def __post_init__(self) -> None:
        where = "ConvParams"
        object.__setattr__(self, "rounding", MultiplierRounding(self.rounding))
        if len(self.multipliers) != len(self.shifts) or not self.multipliers:
            raise InvalidInputError(
                f"{where}: {len(self.multipliers)} multipliers and {len(self.shifts)} shifts; "
                "give one of each per output channel"
            )
        for q, s in zip(self.multipliers, self.shifts, strict=True):
            _check_multiplier(q, s, where)
        _zero_point(-self.input_offset, "-input_offset", where)
        _zero_point(self.output_offset, "output_offset", where)
        _check_range(self.act_min, self.act_max, where)


def conv_params(  # noqa: PLR0917 -- TFLite's (scale, zero point) order
    s_in, z_in, s_w: Sequence[float], s_out, z_out, act=FusedActivation.NONE
) -> ConvParams:
    """``PopulateConvolutionQuantizationParams``: per output channel ``QuantizeMultiplier(
    double(s_in) * double(s_w[c]) / double(s_out))`` (a one-element ``s_w`` is per tensor).

    >>> p = conv_params(0.5, 0, [0.25, 0.125], 0.5, 1)
    >>> p.multipliers, p.shifts, p.output_offset
    ((1073741824, 1073741824), (-1, -2), 1)
    """
    where = "conv_params"
    si, so = _f32(s_in, "s_in", where), _f32(s_out, "s_out", where)
    pairs = [quantize_multiplier(si * _f32(s, "s_w", where) / so) for s in s_w]
    return ConvParams(
        input_offset=-_zero_point(z_in, "z_in", where),
        output_offset=_zero_point(z_out, "z_out", where),
        multipliers=tuple(q for q, _ in pairs),
        shifts=tuple(s for _, s in pairs),
        **fused_activation_clamp(act, so, z_out),
    )


def fully_connected_params(  # noqa: PLR0917 -- TFLite's (scale, zero point) order
    s_in,
    z_in,
    s_w: Sequence[float],
    s_out,
    z_out,
    act=FusedActivation.NONE,
    *,
    runtime=TfliteRuntime.LITERT_REFERENCE,
) -> ConvParams:
    """FULLY_CONNECTED: per channel as :func:`conv_params`; per tensor (one ``s_w``) through
    ``GetQuantizedConvolutionMultipler``, whose product ``s_in * s_w`` is a float32 multiply
    before the double division by ``s_out``.

    The runtimes differ in the output stage: LiteRT's reference FULLY_CONNECTED rounds once
    (:attr:`MultiplierRounding.SINGLE_HALF_UP`), TFLite-Micro twice like every other kernel
    (checked against both interpreters, per channel and per tensor: about one output in 600
    differs by one code).

    >>> p = fully_connected_params(0.5, 0, [0.25], 0.5, 0)
    >>> p.multipliers, p.rounding.value
    ((1073741824,), 'single_half_up')
    """
    rounding = (
        MultiplierRounding.DOUBLE
        if TfliteRuntime(runtime) is TfliteRuntime.TFLITE_MICRO
        else MultiplierRounding.SINGLE_HALF_UP
    )
    if len(s_w) != 1:
        p = conv_params(s_in, z_in, s_w, s_out, z_out, act)
        return replace(p, rounding=rounding)
    where = "fully_connected_params"
    si, sw = _f32(s_in, "s_in", where), _f32(s_w[0], "s_w", where)
    so = _f32(s_out, "s_out", where)
    q, s = quantize_multiplier(float(np.float32(si) * np.float32(sw)) / so)
    return ConvParams(
        input_offset=-_zero_point(z_in, "z_in", where),
        output_offset=_zero_point(z_out, "z_out", where),
        multipliers=(q,),
        shifts=(s,),
        **fused_activation_clamp(act, so, z_out),
        rounding=rounding,
    )


@dataclass(frozen=True)
class TwoInputQuantization:
    """What the Prepare of a two-input kernel (ADD, SUB, MUL, SQUARED_DIFFERENCE, BATCH_MATMUL)
    starts from: the three scales rounded to float32, and the offsets the kernel adds, stored
    as TFLite's ``ArithmeticParams`` does: ``-z1``, ``-z2`` and ``z_out``. Build it with
    :func:`two_input_quantization`, which checks every value."""

    s1: float
    s2: float
    s_out: float
    input1_offset: int
    input2_offset: int
    output_offset: int

    @property
    def twice_max(self) -> float:
        """ADD's common input scale ``2 * max(s1, s2)`` (exact in float32 and in double)."""
        return 2 * max(self.s1, self.s2)

    def offsets(self) -> dict[str, int]:
        """The three offsets, by their ``ArithmeticParams`` field names."""
        return {
            "input1_offset": self.input1_offset,
            "input2_offset": self.input2_offset,
            "output_offset": self.output_offset,
        }

    def input_rescale(self, where: str) -> dict[str, int]:
        """ADD's input stage, which SUB and SQUARED_DIFFERENCE share: each input onto the
        common scale, ``QuantizeMultiplierSmallerThanOneExp(s_i / twice_max)`` in double."""
        q1, e1 = quantize_multiplier_smaller_than_one_exp(self.s1 / self.twice_max, where)
        q2, e2 = quantize_multiplier_smaller_than_one_exp(self.s2 / self.twice_max, where)
        return {
            "input1_multiplier": q1,
            "input1_shift": e1,
            "input2_multiplier": q2,
            "input2_shift": e2,
        }


def two_input_quantization(  # noqa: PLR0917 -- TFLite's (scale, zero point) order
    s1, z1, s2, z2, s_out, z_out, where: str, inputs: tuple[str, str] = ("1", "2")
) -> TwoInputQuantization:
    """The checked :class:`TwoInputQuantization` of a two-input operator; ``where`` and the
    operand names (``inputs``: ``s1``/``z1``..., or ``s_a``/``z_a``... for ``("_a", "_b")``)
    name a bad value in the error.

    >>> q = two_input_quantization(0.5, 3, 0.25, -2, 1.0, 1, "add_params")
    >>> q.twice_max, q.offsets()
    (1.0, {'input1_offset': -3, 'input2_offset': 2, 'output_offset': 1})
    """
    a, b = inputs
    return TwoInputQuantization(
        _f32(s1, f"s{a}", where),
        _f32(s2, f"s{b}", where),
        _f32(s_out, "s_out", where),
        -_zero_point(z1, f"z{a}", where),
        -_zero_point(z2, f"z{b}", where),
        _zero_point(z_out, "z_out", where),
    )


@dataclass(frozen=True)
class PoolParams:
    """MAX_POOL_2D / AVERAGE_POOL_2D (input and output share their quantization): the fused
    activation's clamp range."""

    act_min: int = INT8_MIN
    act_max: int = INT8_MAX
    # Whether act_min / act_max come from a fused activation (a ReLU at zero point -128 sets
    # act_min to the rail itself): the clamps there count as activation_clamped, not lost.
    floor: bool = False
    ceiling: bool = False

    def __post_init__(self) -> None:
        _check_range(self.act_min, self.act_max, "PoolParams")


def pool_params(s_out, z_out, act=FusedActivation.NONE) -> PoolParams:
    """The pools' ``Prepare``: only the activation range.

    >>> pool_params(0.1, -128, FusedActivation.RELU6)
    PoolParams(act_min=-128, act_max=-68, floor=True, ceiling=True)
    """
    return PoolParams(**fused_activation_clamp(act, _f32(s_out, "s_out", "pool_params"), z_out))


@dataclass(frozen=True)
class RequantizeParams:
    """QUANTIZE int8 -> int8 (and MEAN's rescale): ``MBQM(x - input_zero_point, m, s) +
    output_zero_point``, saturated to int8. ``same_quantization``: the float32 scales and the
    zero points are equal (MEAN and CONCATENATION take other paths then)."""

    input_zero_point: int
    output_zero_point: int
    multiplier: int
    shift: int
    same_quantization: bool = False

    def __post_init__(self) -> None:
        where = "RequantizeParams"
        _zero_point(self.input_zero_point, "input_zero_point", where)
        _zero_point(self.output_zero_point, "output_zero_point", where)
        _check_multiplier(self.multiplier, self.shift, where)


def requantize_params(s_in, z_in, s_out, z_out) -> RequantizeParams:
    """QUANTIZE's ``Prepare`` for int8 input: ``QuantizeMultiplier(double(s_in) /
    double(s_out))``.

    >>> p = requantize_params(0.5, 1, 0.25, -3)
    >>> p.multiplier, p.shift, p.same_quantization
    (1073741824, 2, False)
    """
    where = "requantize_params"
    si, so = _f32(s_in, "s_in", where), _f32(s_out, "s_out", where)
    zi, zo = _zero_point(z_in, "z_in", where), _zero_point(z_out, "z_out", where)
    q, s = quantize_multiplier(si / so)
    return RequantizeParams(zi, zo, q, s, same_quantization=(si == so and zi == zo))


MeanParams = RequantizeParams
mean_params = requantize_params
