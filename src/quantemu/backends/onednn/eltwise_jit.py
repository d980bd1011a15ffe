"""oneDNN's JIT f32 ``exp``, ``logistic`` and ``tanh`` (the eltwise injector of oneDNN 3.2).

The int8 RNN cells compute their gate activations with these polynomial approximations, not with
libm: ``jit_uni_eltwise_injector_f32`` (``exp_compute_vector_fwd``, ``logistic_compute_vector_fwd``,
``tanh_compute_vector_fwd`` of ``src/cpu/x64/injectors/jit_uni_eltwise_injector.cpp``, tag
``v3.2``), which every x64 ISA runs with the same constants and the same fused multiply-adds
(AVX2 gathers the tanh coefficients with ``vgatherdps``, AVX-512 with ``vpermt2ps``: the same
values). Each step here is one binary32 operation; ``vfmadd``/``vfnmadd`` are
:func:`~quantemu.backends.onednn.aten.fma_f32` (one rounding). ``reference_rnn`` holds the
scalar references these are tested against.
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.onednn.aten import fma_f32

_F = np.float32
_U = np.uint32


def _f(bits: int) -> np.float32:
    return np.array(bits, dtype=_U).view(_F)[()]


EXP_LOG2E = _f(0x3FB8AA3B)
EXP_LN2 = _f(0x3F317218)
EXP_LN_FLT_MAX = _f(0x42B17218)
EXP_LN_FLT_MIN = _f(0xC2AEAC50)
# exp(r) ~ 1 + r*(p1 + r*(p2 + r*(p3 + r*(p4 + r*p5)))), evaluated by Horner's rule with FMAs.
EXP_POLY = tuple(_f(b) for b in (0x3F7FFFFB, 0x3EFFFEE3, 0x3E2AAD40, 0x3D2B9D0D, 0x3C07CFCE))
TANH_IDX_BIAS = 0x39800000
TANH_IDX_MASK = 0xFFC00000
TANH_LINEAR_UBOUND = _f(0x39DDB3D7)  # below: tanh(x) = x
TANH_SATURATION_LBOUND = _f(0x41102CB3)  # above: tanh(x) = 1
# Degree-6 polynomials, one per half binade of |x| (index = (bits(|x|) - bias) >> 22): row d holds
# the 32 coefficients of degree d.
TANH_COEFFS = (
    (
        0x00000000,
        0x39BFFFFF,
        0x39FFFFFF,
        0x3A3FFFFE,
        0x3A7FFFFB,
        0x3ABFFFF7,
        0x3AFFFFEB,
        0x3B3FFFDC,
        0x3B7FFFAB,
        0x3BBFFF70,
        0x3BFFFEAB,
        0x3C3FFDC0,
        0x3C7FFAAB,
        0x3CBFF701,
        0x3CFFEAAD,
        0x3D3FDC08,
        0x3D7FAACD,
        0x3DBF7081,
        0x3DFEACC9,
        0x3E3DC7FD,
        0x3E7ACBF5,
        0x3EB77A9F,
        0x3EEC9A9F,
        0x3F22991F,
        0x3F42F7D6,
        0x3F67B7CC,
        0x3F76CA83,
        0x3F7EBBE9,
        0x3F7FD40C,
        0x3F7FFF32,
        0x3F7FFFFC,
        0x3F800000,
    ),
    (
        0x3F800000,
        0x3F800018,
        0x3F7FFFE8,
        0x3F7FFFDA,
        0x3F7FFFDC,
        0x3F7FFFDC,
        0x3F7FFFAC,
        0x3F7FFF70,
        0x3F7FFEEC,
        0x3F7FFDC0,
        0x3F7FFBED,
        0x3F7FF704,
        0x3F7FEFF5,
        0x3F7FDBCA,
        0x3F7FBFFF,
        0x3F7F7041,
        0x3F7F009B,
        0x3F7DC36C,
        0x3F7C0AA8,
        0x3F7734B8,
        0x3F70A4DE,
        0x3F5F1FD8,
        0x3F495493,
        0x3F18B9EC,
        0x3ED706CB,
        0x3E390B06,
        0x3D90B11F,
        0x3C21A053,
        0x3AAF7FDB,
        0x37CCC1A3,
        0x355C6733,
        0x00000000,
    ),
    (
        0x00000000,
        0xBE4E0FF1,
        0x3D25B1B1,
        0x3D6B6DAB,
        0x3C9FB1D5,
        0xBABFF06F,
        0x3C07B3F6,
        0xBB3FC1BC,
        0x3A9F5921,
        0xBBBF06F2,
        0xBBB0F402,
        0xBC47DB9E,
        0xBC73D5E7,
        0xBCA25BDA,
        0xBCFCA780,
        0xBD40E07C,
        0xBD7DAB03,
        0xBDBE4A0F,
        0xBDFB14A5,
        0xBE36CC8D,
        0xBE6BD102,
        0xBE9FE7C5,
        0xBEBA0F10,
        0xBEC206A8,
        0xBEA3C388,
        0xBE277D62,
        0xBD8B7960,
        0xBC209F49,
        0xBAAD44CA,
        0xB7C6EEAC,
        0xB663AA41,
        0x00000000,
    ),
    (
        0x00000000,
        0x45B3AE96,
        0xC414EB20,
        0xC450E02E,
        0xC3152B4E,
        0xBEAD2F56,
        0xC2162E02,
        0xBEB4BD5A,
        0xC11A59A4,
        0xBED2F507,
        0xC020D32C,
        0x3DD0F506,
        0xBF2A75E2,
        0xBFF950E3,
        0xBED47334,
        0xBE809B8C,
        0xBEB64532,
        0xBE961A5B,
        0xBE9B63AC,
        0xBEA0D4B2,
        0xBE828A77,
        0xBE378612,
        0xBDC20908,
        0x3D2D3957,
        0x3DD46E89,
        0x3DB3F629,
        0x3D2C5E7B,
        0x3BD20403,
        0x3A59DFAE,
        0x3770AF45,
        0x372CC014,
        0x00000000,
    ),
    (
        0x00000000,
        0xCC981A1B,
        0x4A7EDD3D,
        0x4AB1007C,
        0x48FEDD9C,
        0x41A557B5,
        0x477EE32A,
        0x422557F5,
        0x45FF3CE4,
        0x42A55641,
        0x446E0867,
        0xC33DC19A,
        0x42915214,
        0x43AF4FAD,
        0x4110FE88,
        0xC1099B75,
        0x3FC8A8DC,
        0xBFBEAEF5,
        0xBE365AAD,
        0x3F4D9652,
        0x3DDFA08F,
        0x3E34E9B8,
        0x3E2D07A6,
        0x3DC63567,
        0x3CDAEB78,
        0xBCD17537,
        0xBC92829C,
        0xBB43AB99,
        0xB9B471DD,
        0xB6BAAD5A,
        0xB78BAFC7,
        0x00000000,
    ),
    (
        0x00000000,
        0x52F688D5,
        0xD0505C72,
        0xD08F98E3,
        0xCE505CC9,
        0xC7162B8A,
        0xCC5061D6,
        0xC7162BDF,
        0xCA50B37F,
        0xC7162A3A,
        0xC8422086,
        0x471A714E,
        0xC5ECE1F1,
        0xC70E3D90,
        0xC3EBA94A,
        0x43E0C424,
        0xC21F4552,
        0x42217CC8,
        0x405E7DC4,
        0xC10DD401,
        0x3E96B602,
        0xBD1A6D2F,
        0xBD393883,
        0xBD674682,
        0xBD310016,
        0xB961E269,
        0x3BA32495,
        0x3A7680D5,
        0x38B3173C,
        0x35A9DEEA,
        0x375C3F2A,
        0x00000000,
    ),
    (
        0x00000000,
        0xD8995ED1,
        0x558285EA,
        0x55B2CD69,
        0x53028625,
        0x4BC9991F,
        0x5082898A,
        0x4B4999B3,
        0x4E02C07C,
        0x4AC99764,
        0x4B72C822,
        0xCA40C0E1,
        0x489413E4,
        0x49B12224,
        0x46134C4E,
        0xC60C2D57,
        0x43C83910,
        0xC3C872D1,
        0xC186BC9E,
        0x42325BC3,
        0xBF2FFA4A,
        0x3D9A203C,
        0xBC545A43,
        0xBAE08FEE,
        0x3C80225D,
        0x3B1FD1DF,
        0xBA36B9D1,
        0xB91DE544,
        0xB71F100F,
        0xB408E2ED,
        0xB685FEC8,
        0x00000000,
    ),
)

TANH_POLY = np.array(TANH_COEFFS, dtype=_U).view(_F)
TANH_POLY.setflags(write=False)


def _bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=_F).view(_U)


def exp_jit_f32(x: np.ndarray) -> np.ndarray:
    """oneDNN's JIT ``exp`` of a float32 array: ``2 * 2^(n-1) * p(r)``.

    ``x`` is clamped to ``[ln FLT_MIN, ln FLT_MAX]`` (below ``ln FLT_MIN`` the result is 0);
    ``n = floor(x*log2e + 0.5)`` (a multiply, then an add: two roundings), ``r = fma(-n, ln2,
    x)``, ``p`` the degree-5 Horner polynomial with FMAs, and ``2^(n-1)`` built in the exponent
    field so that ``n = 128`` does not overflow.

    >>> [float(v) for v in exp_jit_f32(np.array([0.0, 1.0, -1.0, -100.0], np.float32))]
    [1.0, 2.7182819843292236, 0.3678794801235199, 0.0]
    >>> float(np.exp(np.float32(-1.0)))  # libm: one ulp lower; exp(-100) is subnormal there
    0.3678794205188751
    """
    x = np.asarray(x, dtype=_F)
    below = x < EXP_LN_FLT_MIN
    x = np.maximum(np.minimum(x, EXP_LN_FLT_MAX), EXP_LN_FLT_MIN)
    n = np.floor(x * EXP_LOG2E + _F(0.5))
    r = fma_f32(-n, EXP_LN2, x)
    exponent = (np.rint(n - _F(1)).astype(np.int32) + 127).astype(_U) << _U(23)
    pow2 = np.where(below, _F(0), exponent.view(_F))
    p = np.full(x.shape, EXP_POLY[4], dtype=_F)
    for c in (EXP_POLY[3], EXP_POLY[2], EXP_POLY[1], EXP_POLY[0], _F(1)):
        p = fma_f32(p, r, c)
    with np.errstate(over="ignore"):  # 2 * 2^127 * p(r) is inf near ln FLT_MAX, as in oneDNN
        return p * pow2 * _F(2)


def logistic_jit_f32(x: np.ndarray) -> np.ndarray:
    """oneDNN's JIT ``logistic``: ``y = e / (e + 1)`` with ``e = exp_jit(-|x|)``, then ``1 - y``
    where the sign bit of ``x`` is clear (so -0.0 takes the negative branch).

    >>> [float(v) for v in logistic_jit_f32(np.array([0.0, -0.0, 2.0, -2.0], np.float32))]
    [0.5, 0.5, 0.8807970881462097, 0.11920291930437088]
    """
    x = np.asarray(x, dtype=_F)
    negative = (_bits(x) & _U(0x80000000)) != 0
    e = exp_jit_f32((_bits(x) | _U(0x80000000)).view(_F))
    y = e / (e + _F(1))
    return np.where(negative, y, _F(1) - y)


def tanh_jit_f32(x: np.ndarray) -> np.ndarray:
    """oneDNN's JIT ``tanh``: a degree-6 polynomial per half binade of ``|x|``.

    ``|x| < 0x1.bb67aep-12`` gives ``|x|``; ``|x| >= 0x1.205966p3`` gives 1; otherwise the
    polynomial of table row ``(bits(|x|) - 0x39800000) >> 22`` evaluated by Horner's rule (FMAs)
    at ``|x|`` minus its value truncated to one mantissa bit. The sign of ``x`` is put back last.

    >>> [float(v) for v in tanh_jit_f32(np.array([0.0, 1e-4, -0.5, 10.0], np.float32))]
    [0.0, 9.999999747378752e-05, -0.46211716532707214, 1.0]
    """
    b = _bits(x)
    sign = b & _U(0x80000000)
    magnitude = b & _U(0x7FFFFFFF)
    a = magnitude.view(_F)
    # Indices below the table (|x| < 2^-12) wrap; those lanes take the linear branch anyway.
    idx = ((magnitude - _U(TANH_IDX_BIAS)) & _U(TANH_IDX_MASK)) >> _U(22)
    idx = np.minimum(idx, _U(31)).astype(np.intp)
    with np.errstate(invalid="ignore"):  # inf - inf in the lanes that saturate to 1 anyway
        reduced = a - (magnitude & _U(TANH_IDX_MASK)).view(_F)
    p = TANH_POLY[6][idx]
    for degree in range(5, -1, -1):
        p = fma_f32(p, reduced, TANH_POLY[degree][idx])
    y = np.where(a < TANH_SATURATION_LBOUND, p, _F(1))
    y = np.where(a < TANH_LINEAR_UBOUND, a, y)
    return (np.asarray(y, dtype=_F).view(_U) ^ sign).view(_F)
