"""``XC_mul``: xcore-opt's int8 elementwise multiply, its compile-time parameters and its run time.

xcore-opt 1.4.2 rewrites every int8 TFLite MUL into ``XC_mul`` (a broadcast operand first gets
an ``XC_broadcast``, a plain copy to the output shape; a fused activation is split out first).
The operator carries one 8-byte blob, lib_nn's ``nn_mul_params_t``: two input offsets
``-zp - 1``, an int16 ``bias``, an int16 ``scalar`` and a ``vlashr_shr``, found by lib_nn's
``mul_boggle`` from the three scales and zero points (:func:`xc_mul_params`). At run time
(:func:`xc_mul_host`) the exact product of the centred inputs is halved (VLSAT 1), multiplied
by ``scalar`` (VLMUL, >>14 rounding), ``bias`` added (VLADD), shifted (VLASHR by
``vlashr_shr``, always a left shift for parameters ``mul_boggle`` derives) and narrowed to int8
(VDEPTH8, rounding, -128 reachable). Facts: lib_nn ``src/c/mul.c`` and
``src/asm/mul_elementwise.S``, lib_tflite_micro ``xcore_mul.cc``, ai_tools
``Transforms/ReplaceMul.cpp``; checked against the 1.4.2 compiler and host interpreter.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

from quantemu.backends.xs3.xformer.lookup import c_round_half_away
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.intmath import saturate, saturate_symmetric, shift_right_floor, wrap

#: the right shifts of VLSAT, VLMUL and VDEPTH8 in lib_nn's mul kernel
VLSAT_SHR, VLMUL_SHR, VDEPTH8_SHR = 1, 14, 8
_BLOB = struct.Struct("<bbhhh")  # nn_mul_params_t, little-endian, no padding
#: below this VLASHR shift ``mul_boggle``'s unsigned ``pow(2, 8 + shr)`` overflows to inf
_MIN_VLASHR_SHR = -VDEPTH8_SHR


@dataclass(frozen=True)
class XcMulParams:
    """lib_nn's ``nn_mul_params_t``: ``in1_offset``/``in2_offset`` are ``-zero_point - 1``
    (int8), ``bias``, ``scalar`` and ``vlashr_shr`` int16."""

    in1_offset: int
    in2_offset: int
    bias: int
    scalar: int
    vlashr_shr: int

    @classmethod
    def from_blob(cls, blob: bytes) -> XcMulParams:
        """Decode the ``mp`` custom option of a compiled ``XC_mul``."""
        if len(blob) != _BLOB.size:
            raise InvalidInputError(
                f"XC_mul 'mp' blob has {len(blob)} bytes, nn_mul_params_t has {_BLOB.size}"
            )
        return cls(*_BLOB.unpack(bytes(blob)))

    def to_blob(self) -> bytes:
        """The 8 bytes xcore-opt stores as the ``mp`` custom option."""
        return _BLOB.pack(self.in1_offset, self.in2_offset, self.bias, self.scalar, self.vlashr_shr)


def _round_int(v: float) -> int:
    """C ``round`` to an int; beyond int32 the C conversion gives ``INT32_MIN`` (x86-64), which
    fails every int16 check just as the out-of-range value does."""
    return int(c_round_half_away(v)) if math.isfinite(v) and abs(v) < 2.0**31 else -(1 << 31)


def _fits16(*values: int) -> bool:
    return all(-(1 << 15) <= v < (1 << 15) for v in values)


def _accumulator_bounds(o1: int, o2: int) -> tuple[int, int]:
    """``mul_boggle``'s halved accumulator range. It multiplies ``127 - offset`` and
    ``-128 - offset`` pairwise, i.e. only the two equal-sign corners of the product (the
    mixed corners, reachable when the zero points differ in sign, are not checked)."""
    acc1 = (127 - o1) * (127 - o2)
    acc2 = (-128 - o1) * (-128 - o2)
    return (max(acc1, acc2) + 1) >> 1, (min(acc1, acc2) + 1) >> 1


def xc_mul_params(  # noqa: PLR0917 -- mul_boggle's own argument order
    s1, s2, s_out, zp1: int, zp2: int, zp_out: int
) -> XcMulParams:
    """xcore-opt's ``XC_mul`` parameters (lib_nn ``mul_boggle``) from the TFLite quantization.

    ``ratio = s1 * s2 / s_out`` in double; starting at ``vlashr_shr = -1`` and decrementing:
    ``scalar = round(ratio * 2**(23 + shr))`` must fit int16 and so must both products
    ``(bound * scalar + 2**13) >> 14`` of :func:`_accumulator_bounds`; then
    ``bias = round(zp_out * 2**(8 + shr))`` and both ``product + bias`` must fit int16.

    Raises UnsupportedError where ``shr`` would drop below -8: there the C code's
    ``pow(2, 8u + shr)`` wraps to ``2**(2**32 - 1)``, the bias check can never pass and
    xcore-opt 1.4.2 does not terminate (``ratio`` of about 1 or more).
    """
    o1, o2 = -int(zp1) - 1, -int(zp2) - 1
    ratio = float(s1) * float(s2) / float(s_out)
    hi, lo = _accumulator_bounds(o1, o2)
    half = 1 << (VLMUL_SHR - 1)
    for shr in range(-1, _MIN_VLASHR_SHR - 1, -1):
        scalar = _round_int(ratio * 2.0 ** (VLSAT_SHR + VLMUL_SHR + VDEPTH8_SHR + shr))
        p_hi, p_lo = (hi * scalar + half) >> VLMUL_SHR, (lo * scalar + half) >> VLMUL_SHR
        if not _fits16(scalar, p_hi, p_lo):
            continue
        bias = _round_int(int(zp_out) * 2.0 ** (VDEPTH8_SHR + shr))
        if _fits16(bias, p_hi + bias, p_lo + bias):
            return XcMulParams(o1, o2, bias, scalar, shr)
    raise UnsupportedError(
        f"MUL with s1*s2/s_out = {ratio:.6g} (scales {float(s1):.6g}, {float(s2):.6g}, "
        f"{float(s_out):.6g}; zero points {zp1}, {zp2}, {zp_out}): xcore-opt 1.4.2's mul_boggle "
        "needs a VLASHR shift below -8 there and never terminates; widen the output range"
    )


def xc_mul_host(x1, x2, p: XcMulParams) -> np.ndarray:
    """``XC_mul`` as the host interpreter runs it (lib_nn ``mul_elementwise_ref``).

    Formula on Z, per element: ``acc = (x1 + o1 + 1)(x2 + o2 + 1) - 1``;
    ``t = (acc + 1) >> 1``; ``m = (scalar * t + 2**13) >> 14``; ``a = clamp16s(m + bias)``;
    ``l = clamp16s(a >> shr)`` for ``shr > 0`` (floor), ``clamp16s(wrap32(a << -shr))``
    otherwise; ``y = clamp((l + 128) >> 8, -128, 127)``. ``clamp16s`` is the VPU's symmetric
    ``[-32767, 32767]``.

    Policy: ties of VLSAT, VLMUL and VDEPTH8 toward +inf (the -1 in ``acc`` makes VLSAT a floor
    of the product / 2); ``t`` never exceeds int16. ``m`` is NOT saturated (the C reference does
    not; the XS3 assembly's VLMUL would, which differs only where ``|m| > 32767``, reachable
    when the zero points differ in sign). The left shift wraps in 32 bits as the C int32 shift
    does (only for ``-shr >= 17``); ``-shr >= 32`` is refused (C leaves it undefined).

    Mirrors: lib_nn ``mul_elementwise_ref`` (``src/c/mul.c``), the kernel the x86 host build
    (``NN_USE_REF``) of ``xcore_mul.cc`` calls; ``mul_elementwise.S`` on the device.

    >>> p = XcMulParams(-1, -3, 704, 19861, -2)  # zp 0 and 2 in, zp 11 out
    >>> xc_mul_host(np.array([0, 127, -128, 127]), np.array([2, 127, 127, -128]), p).tolist()
    [11, 127, -128, -128]
    """
    if p.vlashr_shr <= -32:
        raise UnsupportedError(f"XC_mul vlashr_shr {p.vlashr_shr}: a C int32 shift by >= 32")
    a = np.asarray(x1, np.int64) + (p.in1_offset + 1)
    b = np.asarray(x2, np.int64) + (p.in2_offset + 1)
    t = shift_right_floor(a * b, VLSAT_SHR)  # (acc + 1) >> 1 with acc = product - 1
    m = (t * p.scalar + (1 << (VLMUL_SHR - 1))) >> VLMUL_SHR
    acc = saturate_symmetric(m + p.bias, 16)
    if p.vlashr_shr > 0:
        acc = shift_right_floor(acc, p.vlashr_shr)
    else:
        acc = wrap(acc << -p.vlashr_shr, 32)
    acc = saturate_symmetric(acc, 16)
    return saturate((acc + (1 << (VDEPTH8_SHR - 1))) >> VDEPTH8_SHR, 8).astype(np.int8)


__all__ = ["XcMulParams", "xc_mul_host", "xc_mul_params"]
