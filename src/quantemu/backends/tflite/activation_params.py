"""Prepare-time parameters of TFLite's int8 activations and softmax, per runtime.

Each ``*_params`` function takes the float32 scales, the zero points and the operator's own
float32 option (softmax ``beta``, leaky-relu ``alpha``) and returns a frozen dataclass, derived
in the float width and order of the runtime's ``Prepare``:

- RELU, RELU6, RELU_N1_TO_1 (LiteRT ``ReluPrepare`` + ``QuantizedReluX``; TFLite-Micro
  ``CalculateReluOpData``): ``QuantizeMultiplier(s_in / s_out)``, and the clamp
  ``zp_out + roundf(bound / s_out)``. TFLite-Micro's RELU6 instead clamps
  the input codes to ``[zp_in, zp_in + round(6 / s_in)]`` without requantizing, and it has no
  RELU_N1_TO_1.
- LEAKY_RELU: two multipliers, ``s_in * alpha / s_out`` and ``s_in / s_out``.
- HARD_SWISH: float32 ``hires = s_in / 128``, multipliers ``hires / s_out`` and
  ``hires / (3/32768)``, quantized then rounded to 16 bits (``DownScaleInt32ToInt16Multiplier``).
- LOGISTIC, TANH: LiteRT's reference kernel builds a 256-entry table from the float32 function
  (``PopulateLookupTable``); TFLite-Micro rescales the input to Q4.27
  (``input_multiplier``/``input_left_shift`` from ``frexp(s_in * 2**27)``, ``input_range_radius``
  from ``CalculateInputRadius(4, shift, 31)``) for gemmlowp's fixed-point functions.
- SOFTMAX: both reference runtimes derive ``input_multiplier``, ``input_left_shift``
  (``PreprocessSoftmaxScaling`` with 5 integer bits) and ``diff_min``
  (``-CalculateInputRadius(5, shift)``) for gemmlowp's fixed-point kernel. LiteRT's default
  (optimized) resolver instead builds a float32 table ``expf(-s_in * beta * d)`` for
  ``d = max - x`` in ``[0, 255]`` (``PopulateSoftmaxLookupTable``): ``litert_optimized=True``.

Where a multiplier is a product or quotient of scales, LiteRT computes it in float32 and the
installed TFLite-Micro in double (its source reads float32, but its outputs match only the double
quotients: RELU, LEAKY_RELU, HARD_SWISH, probed at scales where the two differ); the runtime
argument picks. ``expf``/``tanhf`` are glibc's float32 functions in the peers; here they are the
double result rounded to float32 (the same value except within an ulp of a float32 rounding
boundary; the peer sweeps in the README found no table entry where that matters).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.params import (
    FusedActivation,
    TfliteRuntime,
    _zero_point,
    activation_range,
    quantize_multiplier,
)
from quantemu.errors import InvalidInputError, UnsupportedError

__all__ = [
    "GemmlowpActivationParams",
    "HardSwishParams",
    "LeakyReluParams",
    "LutParams",
    "ReluParams",
    "SoftmaxFixedPointParams",
    "SoftmaxFloatTableParams",
    "hard_swish_params",
    "leaky_relu_params",
    "logistic_params",
    "relu_params",
    "softmax_params",
    "tanh_params",
]

INT8_MIN, INT8_MAX = -128, 127
F32 = np.float32


def _scale(value, name: str, where: str) -> np.float32:
    v = F32(value)
    if not (np.isfinite(v) and v > 0):
        raise InvalidInputError(f"{where}: {name} = {value!r} must be a positive finite float32")
    return v


def _check_int(v: int, lo: int, hi: int, name: str, where: str) -> None:
    if not lo <= v <= hi:
        raise InvalidInputError(f"{where}: {name} = {v} outside [{lo}, {hi}]")


def _round_half_away(x: float) -> int:
    return math.trunc(x + 0.5 if x >= 0 else x - 0.5)  # exact for float32 x


@dataclass(frozen=True)
class ReluParams:
    """``clamp(zp_out + MBQM(x - zp_in, multiplier, shift), act_min, act_max)``; with
    ``requantize=False`` (TFLite-Micro RELU6) just ``clamp(x, act_min, act_max)``."""

    input_zero_point: int
    output_zero_point: int
    multiplier: int
    shift: int
    act_min: int
    act_max: int
    requantize: bool = True

    def __post_init__(self) -> None:
        where = "ReluParams"
        _zero_point(self.input_zero_point, "input_zero_point", where)
        _zero_point(self.output_zero_point, "output_zero_point", where)
        _check_int(self.multiplier, 0, 2**31 - 1, "multiplier", where)
        _check_int(self.shift, -31, 31, "shift", where)
        _check_int(self.act_min, INT8_MIN, self.act_max, "act_min", where)
        _check_int(self.act_max, self.act_min, INT8_MAX, "act_max", where)


def relu_params(
    kind: FusedActivation,
    s_in,
    z_in,
    s_out,
    z_out,
    *,
    runtime: TfliteRuntime = TfliteRuntime.LITERT_REFERENCE,
) -> ReluParams:
    """The standalone RELU / RELU6 / RELU_N1_TO_1 of ``runtime`` (``kind`` names which).

    >>> p = relu_params(FusedActivation.RELU6, 0.05, -1, 0.025, -128)  # 6 / 0.025 = 240 codes
    >>> p.multiplier, p.shift, p.act_min, p.act_max, p.requantize
    (1073741824, 2, -128, 112, True)
    >>> p = relu_params("RELU6", 0.05, -1, 0.025, -128, runtime=TfliteRuntime.TFLITE_MICRO)
    >>> p.act_min, p.act_max, p.requantize  # input codes [zp_in, zp_in + 6 / 0.05]
    (-1, 119, False)
    """
    where = "relu_params"
    kind, runtime = FusedActivation(kind), TfliteRuntime(runtime)
    if kind is FusedActivation.NONE:
        raise InvalidInputError(f"{where}: kind must be RELU, RELU6 or RELU_N1_TO_1, got NONE")
    si, so = _scale(s_in, "s_in", where), _scale(s_out, "s_out", where)
    zi, zo = _zero_point(z_in, "z_in", where), _zero_point(z_out, "z_out", where)
    if runtime is TfliteRuntime.TFLITE_MICRO and kind is FusedActivation.RELU6:
        six = min(max(zi + _round_half_away(float(F32(6.0) / si)), INT8_MIN), INT8_MAX)
        return ReluParams(zi, zo, 0, 0, zi, six, requantize=False)
    if runtime is TfliteRuntime.TFLITE_MICRO and kind is FusedActivation.RELU_N1_TO_1:
        raise UnsupportedError(
            f"{where}: TFLite-Micro has no RELU_N1_TO_1 kernel (its op resolver fails to "
            "allocate the model); use runtime=LITERT_REFERENCE"
        )
    micro = runtime is TfliteRuntime.TFLITE_MICRO
    q, s = quantize_multiplier(float(si) / float(so) if micro else float(si / so))
    lo, hi = activation_range(kind, so, zo)
    return ReluParams(zi, zo, q, s, lo, hi)


@dataclass(frozen=True)
class LeakyReluParams:
    """``zp_out + MBQM(x - zp_in, m_identity, s_identity)`` for ``x >= zp_in``, else with the
    alpha multiplier; saturated to int8."""

    input_zero_point: int
    output_zero_point: int
    multiplier_identity: int
    shift_identity: int
    multiplier_alpha: int
    shift_alpha: int

    def __post_init__(self) -> None:
        where = "LeakyReluParams"
        _zero_point(self.input_zero_point, "input_zero_point", where)
        _zero_point(self.output_zero_point, "output_zero_point", where)
        for m, s in ((self.multiplier_identity, self.shift_identity),
                     (self.multiplier_alpha, self.shift_alpha)):  # fmt: skip
            _check_int(m, -(2**31), 2**31 - 1, "multiplier", where)
            _check_int(s, -31, 31, "shift", where)


def leaky_relu_params(
    s_in, z_in, s_out, z_out, alpha, *, runtime: TfliteRuntime = TfliteRuntime.LITERT_REFERENCE
) -> LeakyReluParams:
    """LEAKY_RELU's Prepare: float32 products/quotients (LiteRT), double (TFLite-Micro).

    >>> p = leaky_relu_params(0.05, 0, 0.05, 0, 0.2)  # 1 = 2**30 * 2**(1-31); 0.2 (float32)
    >>> p.multiplier_identity, p.shift_identity, p.multiplier_alpha, p.shift_alpha
    (1073741824, 1, 1717987072, -2)
    """
    where = "leaky_relu_params"
    si, so = _scale(s_in, "s_in", where), _scale(s_out, "s_out", where)
    a = F32(alpha)
    if not np.isfinite(a):
        raise InvalidInputError(f"{where}: alpha = {alpha!r} must be finite")
    if TfliteRuntime(runtime) is TfliteRuntime.TFLITE_MICRO:
        qa, sa = quantize_multiplier(float(si) * float(a) / float(so))
        qi, s_i = quantize_multiplier(float(si) / float(so))
    else:
        qa, sa = quantize_multiplier(float(si * a / so))  # float32 left to right, as in the C
        qi, s_i = quantize_multiplier(float(si / so))
    return LeakyReluParams(
        _zero_point(z_in, "z_in", where), _zero_point(z_out, "z_out", where), qi, s_i, qa, sa
    )


@dataclass(frozen=True)
class HardSwishParams:
    """TFLite's ``HardSwishParams`` (16-bit multipliers, exponents as QuantizeMultiplier's)."""

    input_zero_point: int
    output_zero_point: int
    output_multiplier_fixedpoint_int16: int
    output_multiplier_exponent: int
    reluish_multiplier_fixedpoint_int16: int
    reluish_multiplier_exponent: int

    def __post_init__(self) -> None:
        where = "HardSwishParams"
        _zero_point(self.input_zero_point, "input_zero_point", where)
        _zero_point(self.output_zero_point, "output_zero_point", where)
        _check_int(self.output_multiplier_fixedpoint_int16, 0, 2**15 - 1, "output mult", where)
        _check_int(self.reluish_multiplier_fixedpoint_int16, 0, 2**15 - 1, "reluish mult", where)
        _check_int(self.output_multiplier_exponent, -31, 0, "output_multiplier_exponent", where)
        _check_int(self.reluish_multiplier_exponent, -31, 15, "reluish exponent", where)


def _down_scale_int32_to_int16(m: int) -> int:
    """``DownScaleInt32ToInt16Multiplier``: ``(m + 2**15) >> 16``, 32767 near the top."""
    if m >= 2**31 - 1 - 2**15:
        return 2**15 - 1
    return (m + 2**15) >> 16


def hard_swish_params(
    s_in, z_in, s_out, z_out, *, runtime: TfliteRuntime = TfliteRuntime.LITERT_REFERENCE
) -> HardSwishParams:
    """HARD_SWISH's Prepare; the two quotients in float32 (LiteRT) or double (TFLite-Micro).

    >>> p = hard_swish_params(0.0313725508749485, -1, 0.01715686358511448, -106)
    >>> p.output_multiplier_fixedpoint_int16, p.output_multiplier_exponent
    (29959, -6)
    >>> p.reluish_multiplier_fixedpoint_int16, p.reluish_multiplier_exponent
    (21931, 2)
    """
    where = "hard_swish_params"
    si, so = _scale(s_in, "s_in", where), _scale(s_out, "s_out", where)
    hires = F32(1.0 / 128.0) * si  # exact: a power of two
    reluish_scale = F32(3.0 / 32768.0)
    if TfliteRuntime(runtime) is TfliteRuntime.TFLITE_MICRO:
        m_out, m_rel = float(hires) / float(so), float(hires) / float(reluish_scale)
    else:
        m_out, m_rel = float(hires / so), float(hires / reluish_scale)
    q_out, e_out = quantize_multiplier(m_out)
    if e_out > 0:
        raise UnsupportedError(
            f"{where}: output multiplier s_in / 128 / s_out = {m_out!r} needs a left "
            f"shift ({e_out}); TFLite requires s_out >= s_in / 128 (got s_in={float(si)!r}, "
            f"s_out={float(so)!r})"
        )
    q_rel, e_rel = quantize_multiplier(m_rel)
    if e_rel > 15:
        raise UnsupportedError(
            f"{where}: reluish exponent {e_rel} > 15 (s_in = {float(si)!r} is too large): the "
            "int16 left shift of TFLite's kernel is undefined there"
        )
    return HardSwishParams(
        _zero_point(z_in, "z_in", where),
        _zero_point(z_out, "z_out", where),
        _down_scale_int32_to_int16(q_out),
        e_out,
        _down_scale_int32_to_int16(q_rel),
        e_rel,
    )


@dataclass(frozen=True)
class LutParams:
    """A 256-entry int8 table indexed by ``code + 128`` (LiteRT LOGISTIC/TANH); ``clamped``
    marks the entries whose value TFLite clamped to int8 when it built the table."""

    table: tuple[int, ...]
    clamped: tuple[bool, ...]

    def __post_init__(self) -> None:
        if len(self.table) != 256 or len(self.clamped) != 256:
            raise InvalidInputError("LutParams: table and clamped must have 256 entries")
        if min(self.table) < INT8_MIN or max(self.table) > INT8_MAX:
            raise InvalidInputError("LutParams: table entries must be int8")


@dataclass(frozen=True)
class GemmlowpActivationParams:
    """TFLite-Micro's int8 LOGISTIC/TANH: the input ``x - zp`` is rescaled to Q4.27 by
    ``MBQM(., input_multiplier, input_left_shift)``; ``|x - zp| >= input_range_radius`` goes
    straight to a rail."""

    input_zero_point: int
    input_multiplier: int
    input_left_shift: int
    input_range_radius: int

    def __post_init__(self) -> None:
        where = "GemmlowpActivationParams"
        _zero_point(self.input_zero_point, "input_zero_point", where)
        _check_int(self.input_multiplier, 2**30, 2**31 - 1, "input_multiplier", where)
        _check_int(self.input_left_shift, 0, 31, "input_left_shift", where)
        _check_int(self.input_range_radius, 0, 2**31 - 1, "input_range_radius", where)


def _gemmlowp_q4_params(si: np.float32, zi: int, where: str) -> GemmlowpActivationParams:
    q, shift = math.frexp(float(si) * 2.0**27)
    if shift < 0:
        raise UnsupportedError(
            f"{where}: input scale {float(si)!r} < 2**-28 gives a negative input_left_shift "
            f"({shift}), which TFLite-Micro's CalculateInputRadius cannot shift by"
        )
    radius = math.floor(15 * 2.0**27 / 2.0**shift)  # CalculateInputRadius(4, shift, 31)
    return GemmlowpActivationParams(zi, _round_half_away(q * 2.0**31), shift, radius)


def _lut(si, zi, so, zo, transform) -> LutParams:
    inverse_scale = F32(1.0) / so
    table, clamped = [], []
    for val in range(INT8_MIN, INT8_MAX + 1):  # Prepare-time: 256 table entries
        transformed = transform(si * F32(val - zi))
        rescaled = _round_half_away(float(transformed * inverse_scale))
        quantized = math.trunc(float(F32(rescaled) + F32(zo)))  # float add, then int cast
        table.append(min(max(quantized, INT8_MIN), INT8_MAX))
        clamped.append(not INT8_MIN <= quantized <= INT8_MAX)
    return LutParams(tuple(table), tuple(clamped))


def _expf(v: np.float32) -> np.float32:
    """``expf``: the double result rounded to float32; above float32's range, +inf as expf."""
    x = float(v)
    with np.errstate(over="ignore"):
        return F32(math.exp(x) if x < 709.0 else math.inf)


def _sigmoidf(v: np.float32) -> np.float32:
    return F32(1.0) / (F32(1.0) + _expf(-v))


def _tanhf(v: np.float32) -> np.float32:
    return F32(math.tanh(float(v)))


def logistic_params(
    s_in,
    z_in,
    s_out=1 / 256,
    z_out=-128,
    *,
    runtime: TfliteRuntime = TfliteRuntime.LITERT_REFERENCE,
) -> LutParams | GemmlowpActivationParams:
    """LOGISTIC's Prepare: a table (LiteRT) or gemmlowp input scaling (TFLite-Micro).

    Both runtimes require an output scale of exactly 1/256 (LiteRT) / zero point -128
    (TFLite-Micro); other values are errors, as Prepare fails there.

    >>> p = logistic_params(0.0313725508749485, -1, runtime=TfliteRuntime.TFLITE_MICRO)
    >>> p.input_multiplier, p.input_left_shift, p.input_range_radius  # radius: 15 * 2**4
    (1077952640, 23, 240)
    """
    where = "logistic_params"
    runtime = TfliteRuntime(runtime)
    si, so = _scale(s_in, "s_in", where), _scale(s_out, "s_out", where)
    zi, zo = _zero_point(z_in, "z_in", where), _zero_point(z_out, "z_out", where)
    if runtime is TfliteRuntime.TFLITE_MICRO:
        if zo != INT8_MIN:
            raise UnsupportedError(f"{where}: TFLite-Micro requires z_out = -128, got {zo}")
        return _gemmlowp_q4_params(si, zi, where)
    if so != F32(1 / 256):
        raise UnsupportedError(f"{where}: LiteRT requires s_out = 1/256, got {float(so)!r}")
    return _lut(si, zi, so, zo, _sigmoidf)


def tanh_params(
    s_in, z_in, s_out=1 / 128, z_out=0, *, runtime: TfliteRuntime = TfliteRuntime.LITERT_REFERENCE
) -> LutParams | GemmlowpActivationParams:
    """TANH's Prepare: a table from the output quantization (LiteRT), or gemmlowp input scaling
    (TFLite-Micro, whose kernel ignores the output quantization: it writes Q0.7 codes, i.e.
    assumes scale 1/128 and zero point 0).

    >>> tanh_params(0.0313725508749485, -1).table[128:132]
    (4, 8, 12, 16)
    """
    where = "tanh_params"
    runtime = TfliteRuntime(runtime)
    si, so = _scale(s_in, "s_in", where), _scale(s_out, "s_out", where)
    zi, zo = _zero_point(z_in, "z_in", where), _zero_point(z_out, "z_out", where)
    if runtime is TfliteRuntime.TFLITE_MICRO:
        return _gemmlowp_q4_params(si, zi, where)
    return _lut(si, zi, so, zo, _tanhf)


@dataclass(frozen=True)
class SoftmaxFloatTableParams:
    """LiteRT's int8 SOFTMAX: ``exp_table[d] = expf(-s_in * beta * d)`` (float32) for
    ``d = max - x``, and the output quantization."""

    exp_table: tuple[float, ...]
    output_scale: float
    output_zero_point: int

    def __post_init__(self) -> None:
        if len(self.exp_table) != 256:
            raise InvalidInputError("SoftmaxFloatTableParams: exp_table needs 256 entries")
        _scale(self.output_scale, "output_scale", "SoftmaxFloatTableParams")
        _zero_point(self.output_zero_point, "output_zero_point", "SoftmaxFloatTableParams")


@dataclass(frozen=True)
class SoftmaxFixedPointParams:
    """TFLite-Micro's int8 SOFTMAX: ``x - max`` is rescaled to Q5.26 by
    ``SRDHM((x - max) * 2**input_left_shift, input_multiplier)``; ``x - max < diff_min``
    contributes nothing and outputs -128."""

    input_multiplier: int
    input_left_shift: int
    diff_min: int

    def __post_init__(self) -> None:
        where = "SoftmaxFixedPointParams"
        _check_int(self.input_multiplier, 2**30, 2**31 - 1, "input_multiplier", where)
        _check_int(self.input_left_shift, 0, 31, "input_left_shift", where)
        _check_int(self.diff_min, -(2**31), 0, "diff_min", where)


def softmax_params(
    s_in,
    beta=1.0,
    s_out=1 / 256,
    z_out=-128,
    *,
    runtime: TfliteRuntime = TfliteRuntime.LITERT_REFERENCE,
    litert_optimized: bool = False,
) -> SoftmaxFixedPointParams | SoftmaxFloatTableParams:
    """SOFTMAX's Prepare for int8 in and out.

    Both reference runtimes run gemmlowp's fixed-point kernel (:class:`SoftmaxFixedPointParams`)
    and require an output zero point of -128 and a scale of 1/256 (TFLite-Micro exactly, LiteRT
    within 0.1%). ``litert_optimized=True`` gives instead the float32 table of LiteRT's default
    (optimized) resolver, :class:`SoftmaxFloatTableParams`, which uses the output quantization.

    >>> softmax_params(0.0313725508749485)
    SoftmaxFixedPointParams(input_multiplier=1077952640, input_left_shift=22, diff_min=-496)
    """
    where = "softmax_params"
    runtime = TfliteRuntime(runtime)
    si, so = _scale(s_in, "s_in", where), _scale(s_out, "s_out", where)
    zo, b = _zero_point(z_out, "z_out", where), F32(beta)
    if not (np.isfinite(b) and b > 0):
        raise InvalidInputError(f"{where}: beta = {beta!r} must be a positive finite float32")
    if litert_optimized:
        scale = -si * b  # float32, as PopulateSoftmaxLookupTable
        table = tuple(float(_expf(scale * F32(d))) for d in range(256))
        return SoftmaxFloatTableParams(table, float(so), zo)
    micro = runtime is TfliteRuntime.TFLITE_MICRO
    near = so == F32(1 / 256) if micro else abs(float(so) - 1 / 256) <= 0.001 / 256
    if zo != INT8_MIN or not near:
        raise UnsupportedError(
            f"{where}: {runtime.value} requires int8 output scale 1/256 and zero point -128, got "
            f"{float(so)!r}, {zo}"
        )
    real = min(float(b) * float(si) * 2.0**26, 2.0**31 - 1.0)  # PreprocessSoftmaxScaling
    if not real > 1:
        raise UnsupportedError(
            f"{where}: beta * s_in * 2**26 = {real!r} <= 1; TFLite's "
            "QuantizeMultiplierGreaterThanOne rejects it (input scale too small)"
        )
    q, shift = quantize_multiplier(real)
    diff_min = -math.floor(31 * 2.0**26 / 2.0**shift)  # -CalculateInputRadius(5, shift)
    return SoftmaxFixedPointParams(q, shift, diff_min)
