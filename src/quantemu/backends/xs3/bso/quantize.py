"""From TFLite-style int8 quantization to XS3 BSO parameters, as XMOS's converter derives them.

Rules (``notes/toolchains.md``, XMOS tflite2xcore, BSO era), per output channel ``k``:

- multiplier ``M = s_in * s_w[k] / s_out``;
- ``rshift = -ceil(log2 M) + 1`` and ``scale = round(2^14 * M * 2^rshift)`` (NumPy's round,
  ties to even), so ``scale`` lies in (2^14, 2^15]; a ``scale`` of exactly 2^15 becomes 2^14 with
  ``rshift - 1``;
- headroom: ``rshift -= 7`` (one bit more than the 8 an int8 output needs, for the offset);
- ``shift1 = max(rshift, 0)``, ``shift2 = 22 + 7 - output_bits + min(rshift, 0)`` (21 for int8
  outputs); a negative ``shift2`` is an error (the layer cannot be expressed);
- output zero point through the offset term: ``raw = z_out * 2^shift2 * 2^(output_bits - 8)``,
  ``offset_scale = round(sqrt(|raw|))`` and ``offset = round(raw / offset_scale)`` (0 when
  ``offset_scale`` is 0), so ``offset_scale * offset`` has the sign of ``raw``;
- bias: the TFLite int32 bias (a float bias is first quantized as TFLite does,
  ``round(b / (s_in * s_w[k]))`` with ties away from zero) minus ``z_in * sum(weights of k)``,
  clipped to int32.

The pipeline only approximates ``M``; :func:`pipeline_error` and :func:`layer_error` measure by
how many output LSBs it misses the float ideal ``round(acc * M) + z_out``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.xs3.bso.output_stage import LastStep, bso_stage
from quantemu.backends.xs3.bso.packing import MAX_SHIFT, BsoChannels, pack_bso
from quantemu.backends.xs3.bso.params import Model, check_int
from quantemu.errors import InvalidInputError
from quantemu.intmath import float64_round_half_away_add_truncate

SHIFT_ADJUSTMENT = 7  # tflite2xcore's headroom: 8 would leave none for the offset term
INT32 = (-(2**31), 2**31 - 1)
_LAST_STEPS = {
    "conv2d_deep": LastStep.INT8_WRAPPING,
    "conv2d_shallowin": LastStep.INT8_WRAPPING,
    "conv2d_1x1": LastStep.INT8_EXACT,
    "conv2d_depthwise": LastStep.INT8_EXACT,
    "fully_connected_8": LastStep.INT8_EXACT,
    "fully_connected_16": LastStep.INT16_WRAPPING,
}


@dataclass(frozen=True, eq=False)
class DerivedParams:
    """Per-channel parameters derived from float quantization (int64 arrays of shape ``(C,)``).

    ``multiplier`` is the float64 ``M`` the integer pipeline approximates; ``bias_clipped``
    marks channels whose corrected bias had to be clipped to int32.
    """

    multiplier: np.ndarray
    output_zero_point: int
    output_bits: int
    channels: BsoChannels
    bias_clipped: np.ndarray

    def bso(self) -> np.ndarray:
        """The packed ``(ceil(C/16), 7, 16)`` int16 BSO tensor."""
        return pack_bso(**self.channels.fields())


def _positive_scales(value, name: str) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    bad = ~(np.isfinite(arr) & (arr > 0))
    if bad.any():
        raise InvalidInputError(
            f"derive_bso: {name} must be finite and > 0, got {float(arr[bad].flat[0])!r}; "
            "a zero scale has no multiplier (drop the channel or give it a tiny scale)"
        )
    return arr


def split_multiplier(multiplier) -> tuple[np.ndarray, np.ndarray]:
    """``(rshift, scale)`` with ``scale * 2^-rshift ~ 2^14 * M``, before the headroom shift.

    >>> split_multiplier([0.125, 0.15, 0.0004])
    (array([ 3,  3, 12]), array([16384, 19661, 26844]))
    """
    m = np.asarray(multiplier, dtype=np.float64)
    rshift = (1 - np.ceil(np.log2(m))).astype(np.int64)
    scale = np.round(2.0**14 * (m * 2.0**rshift)).astype(np.int64)
    at_top = scale == 2**15  # M*2^rshift rounded up to 2: keep scale in [2^14, 2^15)
    return rshift - at_top, np.where(at_top, 2**14, scale)


def _shifts(rshift: np.ndarray, output_bits: int, m: np.ndarray):
    rshift = rshift - SHIFT_ADJUSTMENT
    shift1 = np.maximum(rshift, 0)
    shift2 = 22 + SHIFT_ADJUSTMENT - output_bits + np.minimum(rshift, 0)
    for shift, name, why in (
        (shift2, "shift2", "M is too large"),
        (shift1, "shift1", "M is too small"),
    ):
        bad = np.flatnonzero((shift < 0) | (shift > MAX_SHIFT))
        if bad.size:
            k = int(bad[0])
            raise InvalidInputError(
                f"derive_bso: channel {k}: {name} = {int(shift[k])} is outside 0..{MAX_SHIFT} "
                f"({why}: M = {float(m[k])!r}); the layer cannot be expressed with BSO shifts, "
                "rescale the input, weights or output"
            )
    return shift1, shift2


def _offset(z_out: int, shift2: np.ndarray, output_bits: int):
    # |raw| <= 128 * 2^21 = 2^28: exact in float64, and sqrt(|raw|) <= 2^14 fits int16.
    raw = z_out * 2.0 ** (shift2 + output_bits - 8)
    offset_scale = np.round(np.sqrt(np.abs(raw))).astype(np.int64)
    safe = np.where(offset_scale > 0, offset_scale, 1)
    offset = np.where(offset_scale > 0, np.round(raw / safe), 0).astype(np.int64)
    return offset_scale, offset


def _bias(bias, weights, s_in, s_w, z_in, *, channel_axis):
    w = np.moveaxis(np.asarray(weights), channel_axis, 0)
    if w.dtype != np.int8:
        raise InvalidInputError(f"derive_bso: weights must be int8, got {w.dtype}")
    c = w.shape[0]
    if bias is None:
        b = np.zeros(c, dtype=np.int64)
    else:
        b_in = np.broadcast_to(np.asarray(bias), (c,))
        if b_in.dtype.kind in "iu":
            b = b_in.astype(np.int64)  # already the TFLite int32 bias
        else:
            q = np.asarray(b_in, dtype=np.float64) / (s_in * s_w)
            b = float64_round_half_away_add_truncate(q).astype(np.int64)  # TFLite's std::round
    # |z_in * sum(w)| <= 128 * 128 * n: int64 for any realistic kernel.
    unified = b - z_in * w.reshape(c, -1).astype(np.int64).sum(axis=1)
    clipped = np.clip(unified, *INT32)
    return clipped, clipped != unified


def derive_bso(
    *,
    input_scale: float,
    input_zero_point: int,
    weight_scales,
    output_scale: float,
    output_zero_point: int,
    weights: np.ndarray,
    bias=None,
    channel_axis: int = 0,
    output_bits: int = 8,
) -> DerivedParams:
    """Derive the BSO fields of a layer the way XMOS's converter does (module docstring).

    ``weights``: the int8 kernel with output channels on ``channel_axis`` (0 for conv2d_deep,
    1x1 and fully_connected; -1 for depthwise ``(K_h, K_w, C)``); ``weight_scales``: one scale
    per channel (or one for all); ``bias``: float (quantized like TFLite), an int array (the
    TFLite int32 bias as is) or None. ``output_bits``: 8, or 16 for fully_connected_16.
    """
    if output_bits not in (8, 16):
        raise InvalidInputError(f"derive_bso: output_bits = {output_bits!r}, use 8 or 16")
    z_in = check_int(input_zero_point, "derive_bso: input_zero_point", -128, 127)
    z_out = check_int(output_zero_point, "derive_bso: output_zero_point", -128, 127)
    c = np.moveaxis(np.asarray(weights), channel_axis, 0).shape[0]
    s_in = float(_positive_scales(input_scale, "input_scale"))
    s_out = float(_positive_scales(output_scale, "output_scale"))
    s_w = np.broadcast_to(_positive_scales(weight_scales, "weight_scales"), (c,))
    m = s_in * s_w / s_out
    rshift, scale = split_multiplier(m)
    shift1, shift2 = _shifts(rshift, output_bits, m)
    offset_scale, offset = _offset(z_out, shift2, output_bits)
    bias_u, clipped = _bias(bias, weights, s_in, s_w, z_in, channel_axis=channel_axis)
    channels = BsoChannels(bias_u, shift1, scale, offset_scale, offset, shift2)
    return DerivedParams(m, z_out, output_bits, channels, clipped)


@dataclass(frozen=True)
class ErrorReport:
    """How far the integer pipeline lands from the float ideal, in output LSBs.

    ``max_abs_error``: the largest ``|y - ideal|``; ``fraction_off``: the fraction of evaluated
    outputs with ``|y - ideal| >= 1``; ``count``: how many were evaluated;
    ``per_channel_max``: ``max_abs_error`` per channel.
    """

    max_abs_error: int
    fraction_off: float
    count: int
    per_channel_max: tuple[int, ...]


def _ideal(acc: np.ndarray, params: DerivedParams, low: int, high: int) -> np.ndarray:
    # The float ideal rounds ties away from zero, as TFLite's reference kernels do.
    v = acc * params.multiplier
    rounded = float64_round_half_away_add_truncate(v)
    return np.clip(rounded + params.output_zero_point, low, high).astype(np.int64)


def pipeline_error(
    params: DerivedParams,
    acc,
    *,
    op: str = "conv2d_deep",
    symmetric_saturation: bool = False,
    model: Model = Model.HOST_REFERENCE,
) -> ErrorReport:
    """Compare ``op``'s integer output stage with ``clip(round(acc*M) + z_out)`` on ``acc``.

    ``acc``: int32 accumulator values, shape ``(N, C)`` (channels last). Both sides are clipped
    to the output range, so the report measures the rounding of the pipeline, not saturation.
    """
    if op not in _LAST_STEPS:
        raise InvalidInputError(f"pipeline_error: op = {op!r}; use one of {', '.join(_LAST_STEPS)}")
    acc = np.asarray(acc, dtype=np.int64)
    if acc.ndim != 2 or acc.shape[1] != params.channels.channels:
        raise InvalidInputError(
            f"pipeline_error: acc has shape {acc.shape}, expected (N, {params.channels.channels})"
        )
    last = _LAST_STEPS[op]
    low, high = (-32767, 32767) if last is LastStep.INT16_WRAPPING else (-128, 127)
    if symmetric_saturation and last is not LastStep.INT16_WRAPPING:
        low = -127
    y, _ = bso_stage(np.clip(acc, *INT32), params.channels, last, low, Model.parse(model))
    err = np.abs(y.astype(np.int64) - _ideal(acc, params, low, high))
    return ErrorReport(
        max_abs_error=int(err.max()) if err.size else 0,
        fraction_off=float(np.count_nonzero(err) / err.size) if err.size else 0.0,
        count=int(err.size),
        per_channel_max=tuple(int(v) for v in err.max(axis=0)) if err.size else (),
    )


def accumulator_range(params: DerivedParams, weights: np.ndarray, channel_axis: int = 0):
    """Per channel, the smallest and largest accumulator int8 inputs can produce.

    ``bias + sum_k min(-128 w_k, 127 w_k)`` and ``bias + sum_k max(...)``, clipped to int32.
    """
    w = np.moveaxis(np.asarray(weights), channel_axis, 0)
    w = w.reshape(w.shape[0], -1).astype(np.int64)
    lo = params.channels.bias + np.minimum(-128 * w, 127 * w).sum(axis=1)
    hi = params.channels.bias + np.maximum(-128 * w, 127 * w).sum(axis=1)
    return np.clip(lo, *INT32), np.clip(hi, *INT32)


def layer_error(
    params: DerivedParams,
    weights: np.ndarray,
    *,
    channel_axis: int = 0,
    samples: int = 4096,
    **stage,
) -> ErrorReport:
    """:func:`pipeline_error` over the accumulator range the layer can produce.

    Each channel's range (:func:`accumulator_range`) is sampled at ``samples`` evenly spaced
    integers, ends included (every integer when the range is narrower). ``stage`` passes
    ``op``, ``symmetric_saturation`` and ``model`` on.
    """
    lo, hi = accumulator_range(params, weights, channel_axis)
    t = np.linspace(0.0, 1.0, samples)[:, None]
    # lo + t*(hi - lo) in float64 is within one unit of exact for |values| < 2^32; rint keeps
    # the samples inside [lo, hi] (hence in int32).
    acc = np.rint(lo + t * (hi - lo).astype(np.float64)).astype(np.int64)
    return pipeline_error(params, acc, **stage)
