"""The TFLite int8 quantization scheme XMOS's flow starts from, as TFLite's own tools compute it.

An XS3 deployment begins with TFLite post-training int8 quantization
(``tensorflow/lite/tools/optimize/quantization_utils.cc``); tflite2xcore then turns that model's
parameters into BSO (:mod:`quantemu.backends.xs3.quantize`). This module reproduces the TFLite
half, in float32 where TFLite computes in float32:

- activations, per tensor, asymmetric (``GetAsymmetricQuantizationParams``): the range is
  widened to include 0, ``scale = (max - min) / 255``, ``zp_from_min = -128 - min / scale``,
  clamped to [-128, 127] or else rounded half away from zero (``std::round``);
- weights, per output channel, symmetric (``SymmetricPerChannelQuantization``):
  ``scale = max|w| / 127``, codes ``round_half_away(w * (127 / max|w|))`` clamped to
  [-127, 127]; an all-zero channel gets scale 0 and codes 0;
- biases, int32 (``SymmetricBiasQuantize``): ``bias_scale = s_in * s_w`` (float32),
  ``round_half_away(b * float32(1.0 / bias_scale))`` clamped to +-(2^31 - 1); 0 where
  ``bias_scale`` is 0;
- fused activations (``CalculateActivationRangeQuantized``): ReLU clamps at
  ``zp + round(0 / scale)``, ReLU6 also at ``zp + round(6 / scale)`` (a general Clip the same
  way at its bounds);
- fixed output quantization (``operator_property``'s restricted values): LOGISTIC and SOFTMAX
  (scale 1/256, zero point -128), TANH (1/128, 0).

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
# TFLite's fixed int8 output quantization (operator_property restricted values).
FIXED_OUTPUT = {"Sigmoid": (1 / 256, -128), "Tanh": (1 / 128, 0), "Softmax": (1 / 256, -128)}


def activation_params(low: float, high: float) -> tuple[np.float32, int]:
    """TFLite's ``(scale, zero_point)`` for an int8 activation observed in ``[low, high]``.

    Float32 arithmetic as ``GetAsymmetricQuantizationParams``. A range of zero width (a tensor
    that is always 0) has TFLite scale 0; it gets scale 1 here (any positive scale represents
    the constant 0 exactly) with TFLite's zero point -128.

    >>> scale, zero_point = activation_params(0.0, 2.55)
    >>> print(f"{scale:.6g}", zero_point)
    0.01 -128
    >>> activation_params(-1.0, 1.0)[1]  # zp_from_min = -128 + 127.5: the tie goes away from 0
    -1
    """
    f32 = np.float32
    lo = min(f32(low), f32(0.0))
    hi = max(f32(high), f32(0.0))
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise InvalidInputError(
            f"calibrated range [{low}, {high}] is not finite; calibrate on data without inf/nan"
        )
    scale = f32(hi - lo) / f32(QMAX - QMIN)
    if scale == 0:
        return f32(1.0), QMIN
    zp_from_min = f32(QMIN) - lo / scale
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
        """:meth:`quantize` and how many values it clamped to int8 (``output_saturated``)."""
        v = np.asarray(values, dtype=np.float32) / np.float32(self.scale)
        codes = float64_round_half_away_add_truncate(v) + int(self.zero_point)
        clipped = np.clip(codes, QMIN, QMAX)
        return clipped.astype(np.int8), int(np.count_nonzero(clipped != codes))


def int8_encoding(scale, zero_point: int) -> TfliteInt8Encoding:
    """The per-tensor int8 encoding of a TFLite activation (scale kept as its float32 value)."""
    return TfliteInt8Encoding(scale=float(np.float32(scale)), zero_point=int(zero_point))


def quantize_weights(w: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """TFLite per-channel symmetric weights: ``(int8 codes, float32 scales)`` along ``axis``.

    >>> q, s = quantize_weights(np.array([[0.5, -1.0], [0.0, 0.0]], np.float32))
    >>> q.tolist(), s.tolist()
    ([[64, -127], [0, 0]], [0.007874015718698502, 0.0])
    """
    w = np.asarray(w, dtype=np.float32)
    moved = np.moveaxis(w, axis, 0)
    flat = moved.reshape(moved.shape[0], -1)
    half_range = np.max(np.abs(flat), axis=1) if flat.size else np.zeros(flat.shape[0], np.float32)
    scales = (half_range / np.float32(WEIGHT_QMAX)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(half_range > 0, np.float32(WEIGHT_QMAX) / half_range, np.float32(0))
    codes = float64_round_half_away_add_truncate(
        (flat * inv.astype(np.float32)[:, None]).astype(np.float32)
    )
    codes = np.clip(codes, -WEIGHT_QMAX, WEIGHT_QMAX).astype(np.int8).reshape(moved.shape)
    return np.moveaxis(codes, 0, axis), scales


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
