"""The TFLite int8 quantization scheme XMOS's flow starts from, as TFLite's own tools compute it.

An XS3 deployment begins with TFLite post-training int8 quantization
(``tensorflow/lite/tools/optimize/quantization_utils.cc``); tflite2xcore then turns that model's
parameters into BSO (:mod:`quantemu.backends.xs3.quantize`). This module reproduces the TFLite
half, in float32 where TFLite computes in float32:

- activations, per tensor, asymmetric (``DownCastScale`` after the calibration statistics'
  ``TensorRangeSanityCheck`` and ``ExpandVerySmallRange``): the range is widened to include 0,
  a range narrower than 1e-6 is widened by 1e-6 on both sides, ``scale = (max - min) / 255``
  (float32), ``zp_from_min = -128 - min / scale`` (double, stored as float32), clamped to
  [-128, 127] or else rounded half away from zero (``std::round``);
- weights, per output channel, symmetric (``GetUniformQuantizedPerAxisTypeForWeight`` +
  ``SymmetricPerChannelQuantizeValues``): ``m = max|w|``, or 5e-7 where ``2 m <= 1e-6`` (an
  all-zero channel included), ``scale = float32(m) / 127``, codes
  ``round_half_away(w * float32(1.0 / scale))`` clamped to [-127, 127];
- biases, int32 (``SymmetricBiasQuantize``): ``bias_scale = s_in * s_w`` (float32),
  ``round_half_away(b * float32(1.0 / bias_scale))`` clamped to +-(2^31 - 1). Where
  ``|b| / bias_scale`` exceeds ``kBiasMax = (2^31 - 1) // 2``, the converter's quantization
  driver (``SetBiasParamsWithAdjustments``) moves that channel to ``bias_scale = |b| / kBiasMax``
  and ``s_w = bias_scale / s_in`` (double) and requantizes its weights
  (:func:`quantize_weights_and_bias`);
- fused activations (``CalculateActivationRangeQuantized``): ReLU clamps at
  ``zp + round(0 / scale)``, ReLU6 also at ``zp + round(6 / scale)`` (a general Clip the same
  way at its bounds);
- fixed output quantization (``operator_property``'s restricted values): LOGISTIC and SOFTMAX
  (scale 1/256, zero point -128), TANH (1/128, 0);
- same-scale operators: pooling, reshapes and padding keep their input's quantization, and a
  CONCATENATION's inputs take its output's (a fixed-scale input is requantized instead); the
  lowering context applies these (:mod:`quantemu.backends.tflite.lower.context`).

Checked against TensorFlow 2.17's converter: ``tests/backends/tflite/test_tflite_float_path.py``
(float ONNX exports of the reference models derive the int8 files' integers) and
``tests/backends/tflite/test_tflite_converter_rules.py`` (the rules give back every int8 file's
weights and biases from their dequantized values).

``round_half_away`` is ``std::round``, ties away from zero
(:func:`quantemu.intmath.float64_round_half_away_add_truncate`, exact for float32 operands).

``graph.quant_overrides`` (QDQ models) replace any of these: activations must be per tensor
(int8, or uint8 read as int8 with ``zp - 128``, as TFLite's converter does), weights symmetric.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.intmath import float64_round_half_away_add_truncate
from quantemu.program import LinearEncoding

QMIN, QMAX = -128, 127
WEIGHT_QMAX = 127  # TFLite's kMaxQuantizedValue8bit; weights are clamped to [-127, 127]
INT32_MAX = 2**31 - 1
BIAS_MAX = INT32_MAX // 2  # the quantization driver's kBiasMax (room for the accumulator)
# The calibration statistics' TensorRangeSanityCheck and GetQuantizedType's
# ExpandVerySmallRange (kNearZeroTolerance; kSmallestHalfRange is half of it).
NEAR_ZERO = 1.0e-6
SMALLEST_HALF_RANGE = NEAR_ZERO / 2
# TFLite's fixed int8 output quantization (operator_property restricted values).
FIXED_OUTPUT = {"Sigmoid": (1 / 256, -128), "Tanh": (1 / 128, 0), "Softmax": (1 / 256, -128)}


def activation_params(low: float, high: float) -> tuple[np.float32, int]:
    """TFLite's ``(scale, zero_point)`` for an int8 activation observed in ``[low, high]``.

    The range (float32 statistics, widened to include 0) goes through the converter's
    ``TensorRangeSanityCheck`` (narrower than 1e-6: 1e-6 added on both sides) and
    ``ExpandVerySmallRange`` (at most 1e-6 wide: at least +-5e-7), in double; then
    ``DownCastScale``: the scale in float32, the zero point from the minimum in double, stored
    as float32 and rounded half away from zero. A tensor that is always 0 gets scale
    ``2e-6 / 255`` and zero point 0, as the converter gives it.

    >>> scale, zero_point = activation_params(0.0, 2.55)
    >>> print(f"{scale:.6g}", zero_point)
    0.01 -128
    >>> activation_params(-1.0, 1.0)[1]  # zp_from_min = -128 + 127.5: the tie goes away from 0
    -1
    >>> scale, zero_point = activation_params(0.0, 0.0)
    >>> print(f"{scale:.6g}", zero_point)
    7.84314e-09 0
    """
    f32 = np.float32
    lo = min(float(f32(low)), 0.0)
    hi = max(float(f32(high)), 0.0)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise InvalidInputError(
            f"calibrated range [{low}, {high}] is not finite; calibrate on data without inf/nan"
        )
    if abs(hi - lo) < NEAR_ZERO:
        lo, hi = lo - NEAR_ZERO, hi + NEAR_ZERO
    if not hi - lo > NEAR_ZERO:
        lo, hi = min(lo, -SMALLEST_HALF_RANGE), max(hi, SMALLEST_HALF_RANGE)
    scale = f32(f32(hi) - f32(lo)) / f32(QMAX - QMIN)
    zp_from_min = f32(QMIN - lo / float(scale))
    if zp_from_min < QMIN:
        return scale, QMIN
    if zp_from_min > QMAX:
        return scale, QMAX
    return scale, int(float64_round_half_away_add_truncate(zp_from_min))


@dataclass(frozen=True)
class TfliteInt8Encoding(LinearEncoding):
    """A per-tensor int8 :class:`LinearEncoding` whose ``quantize`` is TFLite's QUANTIZE.

    ``clamp(round_half_away(float32(x) / float32(scale)) + zp, -128, 127)``
    (``reference_ops::AffineQuantize``): how float data enters an XS3 deployment, and the ideal
    quantizer per-layer LSB errors are measured against.

    >>> TfliteInt8Encoding(0.5, -1).quantize(np.array([0.25, -0.25, 100.0])).tolist()
    [0, -2, 127]
    """

    def quantize(self, values: np.ndarray) -> np.ndarray:
        return self.quantize_count(values)[0]

    def quantize_count(self, values: np.ndarray) -> tuple[np.ndarray, int]:
        """:meth:`quantize` and how many values it clamped to int8 (``output_saturated``).

        ``float64_round_half_away_add_truncate`` written out in one reused float64 buffer (it
        runs on every layer's float reference in ``evaluate``): ``trunc(v + copysign(0.5, v))``
        is that function for every float32 ``v``; a NaN counts as clamped, as ``!=`` counts it.
        """
        v = np.divide(np.asarray(values, dtype=np.float32), np.float32(self.scale))
        codes = np.asarray(np.copysign(0.5, v, dtype=np.float64))  # 0-d stays an array
        np.add(codes, v, out=codes)
        np.trunc(codes, out=codes)
        np.add(codes, int(self.zero_point), out=codes)
        inside = int(np.count_nonzero((codes >= QMIN) & (codes <= QMAX)))
        np.clip(codes, QMIN, QMAX, out=codes)
        return codes.astype(np.int8), codes.size - inside


def int8_encoding(scale, zero_point: int) -> TfliteInt8Encoding:
    """The per-tensor int8 encoding of a TFLite activation (scale kept as its float32 value)."""
    return TfliteInt8Encoding(scale=float(np.float32(scale)), zero_point=int(zero_point))


def quantize_weights(w: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """TFLite per-channel symmetric weights: ``(int8 codes, float32 scales)`` along ``axis``.

    ``scale = float32(m) / 127`` with ``m = max|w|`` of the channel, or 5e-7 where
    ``2 m <= 1e-6`` (``ExpandVerySmallRange``: an all-zero channel gets ``5e-7 / 127``, codes 0);
    codes as :func:`weight_codes`.

    >>> q, s = quantize_weights(np.array([[0.5, -1.0], [0.0, 0.0]], np.float32))
    >>> q.tolist(), [f"{v:.6g}" for v in s]
    ([[64, -127], [0, 0]], ['0.00787402', '3.93701e-09'])
    """
    w = np.asarray(w, dtype=np.float32)
    moved = np.moveaxis(w, axis, 0)
    flat = moved.reshape(moved.shape[0], -1)
    half_range = np.max(np.abs(flat), axis=1) if flat.size else np.zeros(flat.shape[0], np.float32)
    wide = 2.0 * half_range.astype(np.float64) > NEAR_ZERO
    half_range = np.where(wide, half_range, np.float32(SMALLEST_HALF_RANGE)).astype(np.float32)
    scales = (half_range / np.float32(WEIGHT_QMAX)).astype(np.float32)
    return weight_codes(w, scales, axis), scales


def weight_codes(w: np.ndarray, scales: np.ndarray, axis: int = 0) -> np.ndarray:
    """TFLite's ``SymmetricPerChannelQuantizeValues``: int8 codes of ``w`` at ``scales``.

    ``clamp(round_half_away(float32(w * float32(1.0 / scale))), -127, 127)`` per channel of
    ``axis`` (the reciprocal taken in double from the float32 scale, as the converter does).

    >>> weight_codes(np.array([[0.5, -1.0]], np.float32), np.array([1 / 127], np.float32)).tolist()
    [[64, -127]]
    """
    w = np.asarray(w, dtype=np.float32)
    moved = np.moveaxis(w, axis, 0)
    flat = moved.reshape(moved.shape[0], -1)
    inv = (1.0 / np.asarray(scales, np.float32).astype(np.float64)).astype(np.float32)
    codes = float64_round_half_away_add_truncate((flat * inv[:, None]).astype(np.float32))
    codes = np.clip(codes, -WEIGHT_QMAX, WEIGHT_QMAX).astype(np.int8).reshape(moved.shape)
    return np.moveaxis(codes, 0, axis)


def quantize_weights_and_bias(w: np.ndarray, bias, input_scale, axis: int = 0):
    """Per-channel weights and int32 biases as TFLite's converter derives them together.

    Returns ``(int8 codes, float32 weight scales, int64 bias codes or None)``. Channels whose
    bias would exceed ``BIAS_MAX`` codes at ``s_in * s_w`` take ``bias_scale = |b| / BIAS_MAX``
    and ``s_w = bias_scale / s_in`` (double, stored as float32), their weights requantized at
    that scale (``SetBiasParamsWithAdjustments``); the bias codes use the stored bias scale.

    >>> f32 = np.float32
    >>> w = np.array([[1e-4, -5e-5]], f32)  # s_w = 1e-4 / 127: 10 / (0.01 * s_w) > BIAS_MAX
    >>> q, s, b = quantize_weights_and_bias(w, np.array([10.0], f32), 0.01)
    >>> q.tolist(), f"{s[0]:.6g}", b.tolist()
    ([[107, -54]], '9.31323e-07', [1073741824])
    """
    codes, scales = quantize_weights(w, axis)
    if bias is None:
        return codes, scales, None
    b = np.broadcast_to(np.asarray(bias, np.float32), scales.shape)
    b_scales = bias_scales(input_scale, scales).astype(np.float64)
    abs_b = np.abs(b).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        over = abs_b / b_scales > BIAS_MAX
    if not over.any():
        return codes, scales, quantize_bias(b, b_scales.astype(np.float32))
    new_b = np.where(over, abs_b / BIAS_MAX, b_scales)
    new_w = np.where(over, new_b / float(np.float32(input_scale)), scales).astype(np.float32)
    codes = np.where(_channel_mask(over, codes.shape, axis), weight_codes(w, new_w, axis), codes)
    return codes.astype(np.int8), new_w, quantize_bias(b, new_b.astype(np.float32))


def _channel_mask(per_channel: np.ndarray, shape: tuple, axis: int) -> np.ndarray:
    view = [1] * len(shape)
    view[axis] = -1
    return np.broadcast_to(per_channel.reshape(view), shape)


def bias_scales(input_scale, weight_scales) -> np.ndarray:
    """TFLite's per-channel bias scale ``s_in * s_w`` in float32 (``M``'s numerator)."""
    return (np.float32(input_scale) * np.asarray(weight_scales, np.float32)).astype(np.float32)


def quantize_bias(bias, b_scales: np.ndarray) -> np.ndarray:
    """TFLite's int32 bias codes (int64 array) for float ``bias`` and float32 ``b_scales``.

    >>> f32 = np.float32
    >>> quantize_bias(np.array([0.25, -0.25, 1.0], f32), np.array([0.5, 0.5, 0.0], f32))
    array([ 1, -1,  0])
    """
    c = b_scales.shape[0]
    if bias is None:
        return np.zeros(c, dtype=np.int64)
    b = np.broadcast_to(np.asarray(bias, np.float32), (c,))
    with np.errstate(divide="ignore"):
        # float inv = 1.0 / scale: a double division stored as float32.
        inv = np.where(b_scales != 0, 1.0 / b_scales.astype(np.float64), 0.0).astype(np.float32)
    q = float64_round_half_away_add_truncate((b * inv).astype(np.float32)).astype(np.float64)
    return np.clip(q, -INT32_MAX, INT32_MAX).astype(np.int64)


def quantize_scalar(value: float, scale, zero_point: int) -> int:
    """TFLite's ``Quantize(scale, zp, f)``: ``zp + round_half_away(f / scale)`` in float32."""
    return int(zero_point) + int(
        float64_round_half_away_add_truncate(np.float32(value) / np.float32(scale))
    )


@dataclass(frozen=True)
class ActivationRange:
    """The int8 range a fused activation leaves (TFLite ``CalculateActivationRangeQuantized``).

    ``floor`` / ``ceiling``: whether the activation bounds the output from below (ReLU, Clip
    with a finite minimum) / above (ReLU6, Clip with a finite maximum).
    """

    low: int = QMIN
    high: int = QMAX
    floor: bool = False
    ceiling: bool = False

    def moved(self, raw: np.ndarray) -> np.ndarray:
        """Where the activation changes an unclamped output ``raw`` (bool mask)."""
        mask = np.zeros(np.shape(raw), dtype=bool)
        if self.floor:
            mask |= raw < self.low
        if self.ceiling:
            mask |= raw > self.high
        return mask

    def clamp(self, y: np.ndarray) -> np.ndarray:
        """``y`` clamped to the activation's bounds (int8)."""
        lo = self.low if self.floor else QMIN
        hi = self.high if self.ceiling else QMAX
        return np.clip(y, lo, hi).astype(np.int8)


def activation_range(attrs, encoding: LinearEncoding, where: str) -> ActivationRange:
    """The quantized bounds of a node's fused ``activation`` attribute (none: int8's range).

    ``relu`` and ``clip`` (ReLU6 is clip 0..6) are the activations TFLite fuses into its int8
    kernels; a fused ``leaky_relu`` has no integer form there and is an error.
    """
    kind = attrs.get("activation")
    if kind is None:
        return ActivationRange()
    s, z = encoding.scale, int(encoding.zero_point)
    if kind == "relu":
        return ActivationRange(max(QMIN, quantize_scalar(0.0, s, z)), QMAX, floor=True)
    if kind == "clip":
        lo, hi = float(attrs["activation_min"]), float(attrs["activation_max"])
        floor, ceiling = bool(np.isfinite(lo)), bool(np.isfinite(hi))
        low = max(QMIN, quantize_scalar(lo, s, z)) if floor else QMIN
        high = min(QMAX, quantize_scalar(hi, s, z)) if ceiling else QMAX
        return ActivationRange(low, high, floor, ceiling)
    raise UnsupportedError(
        f"{where}: fused activation {kind!r} has no int8 form in TFLite's fused kernels (relu, "
        "relu6/clip); keep it as a separate node (quantemu.graph.run_passes without "
        "fuse_activation)"
    )


def override_activation(override, name: str) -> LinearEncoding:
    """The int8 encoding a QDQ override fixes for activation ``name``."""
    if override.per_axis:
        raise UnsupportedError(
            f"tensor {name!r}: per-axis activation quantization ({override.source}) cannot be "
            "represented; XS3 (TFLite int8) quantizes activations per tensor"
        )
    zp = int(np.asarray(override.zero_point).reshape(-1)[0])
    scale = float(np.asarray(override.scale, np.float32).reshape(-1)[0])
    if override.dtype == "uint8":
        zp -= 128  # the same real values on the int8 grid, as TFLite's converter rewrites uint8
    elif override.dtype != "int8":
        raise UnsupportedError(
            f"tensor {name!r}: {override.dtype} quantization ({override.source}) cannot be "
            "represented; XS3 activations are int8 (or uint8, shifted by 128)"
        )
    return int8_encoding(scale, zp)


def override_weights(override, name: str, axis: int, channels: int):
    """``(int8 codes, float32 scales)`` a QDQ override fixes for weight ``name``."""
    zp = np.asarray(override.zero_point)
    if override.values is None or np.any(zp != 0) or override.dtype != "int8":
        raise UnsupportedError(
            f"weight {name!r}: {override.dtype} quantization with zero point(s) "
            f"{zp.reshape(-1)[:4].tolist()} ({override.source}) cannot be represented; XS3 "
            "weights are symmetric int8 (zero point 0)"
        )
    if override.per_axis and override.axis != axis:
        raise UnsupportedError(
            f"weight {name!r}: quantized along axis {override.axis}, XS3 needs the output "
            f"channel axis {axis}"
        )
    scales = np.broadcast_to(np.asarray(override.scale, np.float32).reshape(-1), (channels,))
    return np.asarray(override.values, np.int8), scales.astype(np.float32)
