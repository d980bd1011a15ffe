"""Converter programming: float scale factors and offsets -> NVDLA register values.

The software side of seed 001 ("Converter programming"), following NVIDIA's compiler
(``nvdla/sw``, as recorded in ``notes/toolchains.md``, NVDLA section):

* :func:`split_scale` turns a float factor into ``(int16 scale, shift)`` the way the compiler
  does: ``numBits = floor(log(|s|) / log(2)) + 1`` with a *float32* logarithm, ``shift = 15 -
  numBits``, ``scale = trunc(2^shift * |s|)`` (truncation, not rounding), sign applied.
* :func:`split_scales` shares one shift across a vector (taken from the largest factor).
* :func:`quantize_bias_int16` is the compiler's int16 bias rule with its ``biasShift``.
* The seed's equations: bias alignment, batch-norm mean shifter, element-wise converters for
  MAX/SUM/PROD, CDP input/output converters, valued padding ``-offset * SF``, PDP programming.

All float arithmetic happens in the width the compiler uses (float32 for its ``NvF32`` values);
the integer results are plain Python ints or int16/int32 NumPy arrays, ready for the register
blocks. A factor the hardware cannot express raises :class:`InvalidInputError` with the reason.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence

import numpy as np

from quantemu.backends.nvdla.registers import PdpRegisters, PoolingMethod, Precision
from quantemu.errors import InvalidInputError
from quantemu.intmath import float32_round_half_up_add_floor, float64_round_half_away_add_truncate

__all__ = [
    "ScaleSplit",
    "bias_alignment_shift",
    "cdp_converter_fields",
    "ew_converter_fields",
    "output_converter_fields",
    "padding_value",
    "pdp_padding_fields",
    "program_bn_mean",
    "program_pdp",
    "quantize_bias_int16",
    "quantize_weights",
    "split_scale",
    "split_scales",
]

INT16_MAX = (1 << 15) - 1


class ScaleSplit(enum.Enum):
    """How :func:`split_scale` counts the integer bits of a factor.

    ``NVDLA_COMPILER``: as NVIDIA's compiler, ``floor(log(float32 |s|) / log 2)`` with the float32
    logarithm (``logf``, taken here as the correctly rounded float32 of ``ln |s|``), so an exact
    power of two can land one bit low; the scale then reaches ``2^15`` and the compiler rejects
    the factor (see the README). ``EXACT``: the exact ``floor(log2 |s|)``.
    """

    NVDLA_COMPILER = "nvdla_compiler"
    EXACT = "exact"


def _f32(v: float) -> float:
    return float(np.float32(v))


def _num_bits(a: float, how: ScaleSplit) -> int:
    """Bits before the radix point of ``a > 0``: ``floor(log2 a) + 1`` (compiler or exact)."""
    if how is ScaleSplit.EXACT:
        return math.frexp(a)[1]  # a = m * 2^e, 0.5 <= m < 1: floor(log2 a) + 1 = e, exactly
    return math.floor(_f32(math.log(a)) / math.log(2)) + 1


def split_scale(
    s: float, *, shift: int | None = None, how: ScaleSplit = ScaleSplit.NVDLA_COMPILER
) -> tuple[int, int]:
    """``(scale, shift)`` with ``s ~= scale * 2^-shift``, ``scale`` an int16 (NVIDIA's rule).

    ``s`` is first rounded to float32 (the compiler's ``NvF32``). Without a forced ``shift``:
    ``shift = 15 - numBits`` so that ``|scale|`` lies in ``[2^14, 2^15)``; ``numBits > 15`` is
    an error (the factor needs more than 15 integer bits). ``scale = trunc(2^shift * |s|)``
    (truncation toward zero, computed in double as ``pow(2, shift) * |s|``), then the sign of
    ``s``. A shift of 64 or more, or a scale beyond int16, is an error. ``s = 0`` gives
    ``(0, shift or 1)``. A forced ``shift = 0`` means "not forced", as in the compiler.

    >>> split_scale(0.75), split_scale(-3.1), split_scale(0.001)
    ((24576, 15), (-25395, 13), (16777, 24))
    """
    a = abs(_f32(s))
    if not math.isfinite(a):
        raise InvalidInputError(f"split_scale: the factor {s!r} is not finite")
    if a == 0.0:
        return 0, shift or 1
    if not shift:
        bits = _num_bits(a, how)
        if bits > 15:
            raise InvalidInputError(
                f"split_scale: |{s}| needs {bits} integer bits; an int16 scale holds at most 15 "
                "(a factor of 2^15 or more cannot be expressed by the converter)"
            )
        shift = 15 - bits
    if shift >= 64:
        raise InvalidInputError(
            f"split_scale: {s} needs a right shift of {shift} (>= 64, the NVDLA truncate field "
            "is 6 bits); the factor is too small for this converter"
        )
    scale = math.trunc(math.ldexp(a, shift))
    if scale > INT16_MAX:
        raise InvalidInputError(
            f"split_scale: {s} with shift {shift} gives scale {scale} > 32767 (int16). NVIDIA's "
            "compiler rejects this too; it happens for exact powers of two whose float32 log "
            "lands one bit low (use how=ScaleSplit.EXACT), or for a forced shift too large "
            "for this factor"
        )
    return (-scale if s < 0 else scale), shift


def split_scales(values: Sequence[float] | np.ndarray, **kwargs) -> tuple[np.ndarray, int]:
    """Int16 scales sharing one shift, taken from the largest ``|value|`` (the compiler's rule).

    Returns ``(scales, shift)``; ``scales[i] = sign(v_i) * trunc(|v_i| * 2^shift)``, with every
    ``v_i`` first rounded to float32 as in :func:`split_scale`.

    >>> split_scales([0.5, -0.25, 0.1], how=ScaleSplit.EXACT)
    (array([16384, -8192,  3276], dtype=int16), 15)
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        raise InvalidInputError("split_scales: no values")
    a = np.abs(v.astype(np.float32)).astype(np.float64)
    if not np.all(np.isfinite(a)):
        bad = v[~np.isfinite(a)][0]
        raise InvalidInputError(f"split_scale: the factor {bad!r} is not finite")
    big = float(v[np.argmax(a)])  # the first largest, as max() picks it
    _, shift = split_scale(big, **kwargs)
    if not shift:
        # The compiler reads a forced shift of 0 as "not forced": each factor is then split on
        # its own (rare: the largest factor already needs 15 integer bits).
        scales = [split_scale(x, shift=shift, **kwargs)[0] for x in v.tolist()]
        return np.array(scales, dtype=np.int16), shift
    # ldexp by a power of two is exact, trunc too; |v_i| <= |big| keeps every scale within the
    # int16 bound split_scale(big) has already checked.
    scale = np.trunc(np.ldexp(a, shift))
    return np.where(v < 0, -scale, scale).astype(np.int16), shift


def output_converter_fields(s_in: float, s_w: float, s_out: float, **kwargs) -> dict[str, int]:
    """SDP output converter for a per-tensor rescale ``s_in * s_w / s_out`` (raw fields).

    ``CVT_OFFSET = 0``; the factor is computed in float32 as the compiler does.
    """
    rescale = _f32(_f32(_f32(s_in) * _f32(s_w)) / _f32(s_out))
    scale, shift = split_scale(rescale, **kwargs)
    return {"CVT_OFFSET": 0, "CVT_SCALE": scale % (1 << 16), "CVT_SHIFT": shift}


def quantize_weights(w) -> tuple[np.ndarray, float]:
    """Int8 weights per kernel: ``scale = max|w| / 127``, ``q = clamp(floor(w / scale + 0.5))``.

    All in float32, as the compiler (round half up, then saturated to [-128, 127]).
    """
    wf = np.asarray(w, dtype=np.float32)
    amax = np.float32(np.abs(wf).max()) if wf.size else np.float32(0)
    scale = np.float32(amax / np.float32(127)) if amax > 0 else np.float32(1)
    q = float32_round_half_up_add_floor(wf / scale)
    return np.clip(q, -128, 127).astype(np.int8), float(scale)


def quantize_bias_int16(bias, s_in: float, s_w) -> tuple[np.ndarray, int]:
    """The compiler's int16 bias: ``(b16, BS_ALU_SHIFT_VALUE)``.

    ``b32 = (int32) floor(b / (s_in * s_w) + 0.5f)`` in float32; ``numBits = ceil(log2
    max|b32|) + 1``; ``biasShift = min(16, max(0, numBits - 16))``; ``b16 = b32 >> biasShift``
    (floor). The X-unit shifter restores ``b16 << biasShift`` (seed 001's bias alignment:
    ``SF_bs * 2^bs_shift = SF_in * SF_wt``).
    """
    b = np.asarray(bias, dtype=np.float32)
    denom = np.float32(s_in) * np.asarray(s_w, dtype=np.float32)
    b32 = float32_round_half_up_add_floor(b / denom).astype(np.float64)
    b32 = np.clip(b32, -(2.0**31), 2.0**31 - 1).astype(np.int64)
    m = int(np.abs(b32).max()) if b32.size else 0
    num_bits = math.ceil(math.log2(m)) + 1 if m > 0 else 0
    shift = min(16, max(0, num_bits - 16))
    b16 = b32 >> shift
    if b16.size and (b16.min() < -(1 << 15) or b16.max() > INT16_MAX):
        raise InvalidInputError(
            f"quantize_bias_int16: biases need {num_bits} bits; even the largest bias shift "
            "(16) leaves values beyond int16"
        )
    return b16.astype(np.int16), shift


def bias_alignment_shift(s_in: float, s_w: float, s_bs: float, *, cc_out_trunc: int = 0) -> int:
    """Seed 001's bias alignment: the ``bs_shifter`` with ``SF_bs * 2^shift = SF_in*SF_wt /
    2^cc_out_trunc`` (direct convolution; add ``pra_trunc`` to ``cc_out_trunc`` for Winograd).

    The ratio must be an exact power of two between 2^0 and 2^63, or the bias cannot be aligned.
    """
    ratio = s_in * s_w / (2.0**cc_out_trunc) / s_bs
    m, e = math.frexp(ratio)
    if m != 0.5 or not 1 <= e <= 64:
        raise InvalidInputError(
            f"bias_alignment_shift: SF_in*SF_wt / 2^cc_out_trunc / SF_bs = {ratio} is not a "
            "power of two in [2^0, 2^63]; choose SF_bs = SF_in*SF_wt / 2^(cc_out_trunc + k)"
        )
    return e - 1


def _int16_with_shift(values: np.ndarray, what: str) -> tuple[np.ndarray, int]:
    """Round to integers, then the smallest shift that fits them in int16 (floor shift)."""
    r = np.floor(np.abs(values) + 0.5) * np.sign(values)  # round half away from zero
    m = float(np.abs(r).max()) if r.size else 0.0
    shift = 0
    while m >= 2.0**15 * 2**shift:
        shift += 1
    if shift > 63:
        raise InvalidInputError(f"{what}: values of magnitude {m} need a shift beyond 63")
    return (r.astype(np.int64) >> shift).astype(np.int16), shift


def program_bn_mean(mean, sf_in: float) -> tuple[np.ndarray, int]:
    """Batch-norm mean subtraction in an X unit: ALU SUM operands and ``ALU_SHIFT_VALUE``.

    Seed 001: ``SF_in = SF_bn_m_cvt * 2^bn_m_shifter``. The operand is ``-mean * SF_in`` rounded
    half away, brought into int16 by the smallest right shift; the unit's operand shifter
    restores it (``op << shift``), so the subtracted value is ``mean * SF_in`` within
    ``2^shift``.
    """
    return _int16_with_shift(-np.asarray(mean, dtype=np.float64) * sf_in, "program_bn_mean")


def ew_converter_fields(
    op: str, *, o_in: float, sf_in: float, o_ew: float, sf_ew: float, which: str = "ALU", **kw
) -> dict[str, int]:
    """Seed 001's ``ew_inv_cvt`` (``EW_<which>_CVT_*``) for an element-wise MAX, SUM or PROD.

    The EW stream arrives as ``(x - o_ew) * sf_ew``; the converter computes ``(v - OFFSET) *
    SCALE >> TRUNCATE``, which encodes it as ``(x - (o_ew + OFFSET / sf_ew)) * sf_ew * SF_inv``.
    MAX needs both offset and scale equal to the input stream's (``o_in``, ``sf_in``); SUM only
    the scale; PROD a zero offset (its scale is left at 1).
    """
    op = op.upper()
    if op not in ("MAX", "SUM", "PROD"):
        raise InvalidInputError(f"ew_converter_fields: op must be MAX, SUM or PROD, got {op!r}")
    sf_inv = 1.0 if op == "PROD" else sf_in / sf_ew
    offset = {"MAX": (o_in - o_ew) * sf_ew, "SUM": 0.0, "PROD": -o_ew * sf_ew}[op]
    scale, shift = split_scale(sf_inv, **kw)
    off = _round_away(offset)
    if not -(1 << 31) <= off < 1 << 31:
        raise InvalidInputError(f"ew_converter_fields: offset {off} does not fit int32")
    p = f"EW_{which}_CVT"
    return {
        f"{p}_BYPASS": 0,
        f"{p}_OFFSET": off % (1 << 32),
        f"{p}_SCALE": scale % (1 << 16),
        f"{p}_TRUNCATE": shift,
    }


def cdp_converter_fields(
    *, o_in: float, sf_in: float, m: int, sf_lut: float, o_out: float, sf_out: float,
    precision: Precision = Precision.INT8, **kw,
) -> dict[str, int]:  # fmt: skip
    """Seed 001's CDP converters: LUT input ``x * 2^M`` and the requested output encoding.

    The input arrives stored as ``(x - o_in) * sf_in``; the converter computes ``(v - OFFSET) *
    SCALE``, so ``OFFSET = -o_in * sf_in`` (the seed's ``O_cdp_in_cvt``) and ``SCALE = 2^M /
    sf_in`` give ``x * 2^M``. Output: ``SF_cdp_out = sf_out / (sf_lut * 2^M)`` and
    ``O_cdp_out = o_out * sf_lut * 2^M`` (``sf_lut`` is the scale of the LUT entries).
    """
    in_scale, in_shift = split_scale(2.0**m / sf_in, **kw)
    if in_shift > 31:
        raise InvalidInputError(
            f"cdp_converter_fields: DATIN_SHIFTER {in_shift} exceeds its 5-bit field; "
            "choose a larger M or input scale"
        )
    out_scale, out_shift = split_scale(sf_out / (sf_lut * 2.0**m), **kw)
    o_cvt_in = _round_away(-o_in * sf_in)
    o_cvt_out = _round_away(o_out * sf_lut * 2.0**m)
    in_bits = 8 if precision is Precision.INT8 else 16
    return {
        "DATIN_OFFSET": o_cvt_in % (1 << in_bits),
        "DATIN_SCALE": in_scale % (1 << 16),
        "DATIN_SHIFTER": in_shift,
        "DATOUT_OFFSET": o_cvt_out % (1 << 32),
        "DATOUT_SCALE": out_scale % (1 << 16),
        "DATOUT_SHIFTER": out_shift,
    }


def _round_away(v: float) -> int:
    """The compiler's ``floor(|v| + 0.5)`` with ``v``'s sign, as a Python int."""
    return int(float64_round_half_away_add_truncate(v))


def padding_value(offset: float, sf: float) -> int:
    """Valued padding for an input encoded as ``(x - offset) * SF``: ``-offset * SF`` (seed 001).

    >>> padding_value(3.0, 2.5), padding_value(-1.2, 10.0)
    (-8, 12)
    """
    return _round_away(-offset * sf)


def pdp_padding_fields(pad: int, precision: Precision) -> dict[str, int]:
    """``PAD_VALUE_<n>X = n * pad`` for n = 1..7 as raw 19-bit fields (§4.2)."""
    fields = {}
    for n in range(1, 8):
        v = n * pad
        if not -(1 << 18) <= v < 1 << 18:
            raise InvalidInputError(f"pdp_padding_fields: {n} * {pad} does not fit 19 bits")
        fields[f"PAD_VALUE_{n}X"] = v % (1 << 19)
    del precision  # the encoding is the same; the hardware's decode width depends on it
    return fields


#: The firmware's FP16 reciprocals 1/k, k = 1..8, as fp17 words (nvdla/sw kmd ``pdp.c``,
#: ``recip_kernel_size[1]``): 1/k to the nearest fp17 (6-bit exponent, bias 31, 10 fraction
#: bits), so 1/3, 1/5, 1/6 and 1/7 are inexact. The INT8/INT16 row is ``floor(2^16 / k)``.
RECIP_KERNEL_FP17 = (0x7C00, 0x7800, 0x7555, 0x7400, 0x7266, 0x7155, 0x7092, 0x7000)


def _recip(k: int, precision: Precision) -> int:
    return RECIP_KERNEL_FP17[k - 1] if precision is Precision.FP16 else (1 << 16) // k


def program_pdp(
    shape: tuple[int, int, int],
    kernel: tuple[int, int],
    *,
    stride: tuple[int, int] = (1, 1),
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),
    method: PoolingMethod = PoolingMethod.AVERAGE,
    precision: Precision = Precision.INT8,
    pad_value: int = 0,
) -> PdpRegisters:
    """PDP registers for pooling a ``[C, H, W]`` cube as the firmware programs them.

    ``pads`` = (top, left, bottom, right); reciprocals ``floor(2^16 / k)`` (FP16: the fp17 words
    of :data:`RECIP_KERNEL_FP17`); padding values ``n * pad_value`` (zero point compensation,
    average pooling only; 0 in FP16, which has no offset).
    """
    (c, h, w), (kh, kw), (sh, sw) = shape, kernel, stride
    pt, pl, pb, pr = pads
    return PdpRegisters(
        INPUT_DATA=int(precision),
        POOLING_METHOD=int(method),
        CUBE_IN_CHANNEL=c - 1,
        CUBE_IN_HEIGHT=h - 1,
        CUBE_IN_WIDTH=w - 1,
        CUBE_OUT_CHANNEL=c - 1,
        CUBE_OUT_HEIGHT=(h + pt + pb - kh) // sh,
        CUBE_OUT_WIDTH=(w + pl + pr - kw) // sw,
        KERNEL_HEIGHT=kh - 1,
        KERNEL_WIDTH=kw - 1,
        KERNEL_STRIDE_HEIGHT=sh - 1,
        KERNEL_STRIDE_WIDTH=sw - 1,
        PAD_TOP=pt,
        PAD_LEFT=pl,
        PAD_BOTTOM=pb,
        PAD_RIGHT=pr,
        RECIP_KERNEL_HEIGHT=_recip(kh, precision),
        RECIP_KERNEL_WIDTH=_recip(kw, precision),
        **pdp_padding_fields(pad_value, precision),
    )
