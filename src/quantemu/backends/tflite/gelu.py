"""TFLite's int8 GELU: a 256-entry table built at Prepare, looked up per code.

LiteRT's ``GeluPrepare`` fills the table with ``LUTPopulate<int8_t>`` (the same loop as
LOGISTIC/TANH: :func:`~quantemu.backends.tflite.activation_params._lut`) over one of two float32
transforms, picked by the op's ``approximate`` option (``reference/gelu.h``):

- exact (ONNX ``approximate="none"``): ``0.5f * x * erfcf(x * (float)-M_SQRT1_2)``;
- tanh (``approximate="tanh"``): ``0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)))``
  with ``k = (float)(M_2_SQRTPI * M_SQRT1_2)`` (sqrt(2/pi)).

Any output quantization is accepted. ``erfcf``/``tanhf`` are glibc's float32 functions in the
peer; here the double result rounded to float32. The older source's exact form,
``0.5 * x * (1 + erf(x * M_SQRT1_2))`` in double, gives the same tables on every recorded
case and on 3,000 random quantizations (``tests/backends/tflite/gelu_peer_vectors.json`` holds
all 256 codes of LiteRT 2.3.0 at 6 quantizations per form; BUILTIN and BUILTIN_REF agree).

The installed TFLite-Micro and XMOS runtimes register no GELU kernel (``Didn't find op for
builtin opcode 'GELU'``), so the TFLite-Micro runtime has no GELU here either.
"""

from __future__ import annotations

import math

import numpy as np

from quantemu.backends.tflite.activation import _lookup
from quantemu.backends.tflite.activation_params import LutParams, _lut, _scale
from quantemu.backends.tflite.params import TfliteRuntime, _zero_point
from quantemu.errors import InvalidInputError, UnsupportedError

__all__ = ["GELU_APPROXIMATIONS", "gelu_int8", "gelu_params", "gelu_transform"]

F32 = np.float32
GELU_APPROXIMATIONS = ("none", "tanh")
_NEG_SQRT1_2 = F32(-math.sqrt(0.5))
_SQRT_2_PI = F32(2.0 / math.sqrt(math.pi) * math.sqrt(0.5))  # constexpr float kSqrt2dPi
_C = F32(0.044715)


def _gelu_erfc(x: np.float32) -> np.float32:
    return F32(F32(0.5) * x) * F32(math.erfc(float(x * _NEG_SQRT1_2)))


def _gelu_tanh(x: np.float32) -> np.float32:
    inner = x + _C * x * x * x  # ((0.044715f * x) * x) * x, left to right as in C
    return F32(F32(0.5) * x) * (F32(1.0) + F32(math.tanh(float(_SQRT_2_PI * inner))))


def gelu_transform(approximate: str):
    """The float32 function LiteRT tabulates for ``approximate`` ("none" or "tanh").

    >>> f = gelu_transform("none")
    >>> float(f(np.float32(1.0))), float(gelu_transform("tanh")(np.float32(1.0)))
    (0.8413447141647339, 0.8411920070648193)
    """
    if approximate == "none":
        return _gelu_erfc
    if approximate == "tanh":
        return _gelu_tanh
    raise InvalidInputError(
        f"GELU: approximate = {approximate!r}; supported: {', '.join(GELU_APPROXIMATIONS)}"
    )


def gelu_params(
    s_in,
    z_in,
    s_out,
    z_out,
    *,
    approximate: str = "none",
    runtime: TfliteRuntime = TfliteRuntime.LITERT_REFERENCE,
) -> LutParams:
    """GELU's Prepare (LiteRT): the ``LUTPopulate`` table of :func:`gelu_transform`.

    Formula per code ``q``: ``t = f(s_in * float(q - z_in))`` (float32);
    ``clamp(int(float(round(t * (1 / s_out))) + z_out), -128, 127)``, ``round`` ties away.

    >>> gelu_params(0.05, 0, 0.05, -20).table[128:133]  # q = 0..4: x = 0, .05, .1, .15, .2
    (-20, -19, -19, -18, -18)
    """
    where = "gelu_params"
    runtime = TfliteRuntime(runtime)
    if runtime is TfliteRuntime.TFLITE_MICRO:
        raise UnsupportedError(
            f"{where}: TFLite-Micro (the installed build) has no GELU kernel; "
            "use runtime=litert_reference"
        )
    transform = gelu_transform(approximate)
    si, so = _scale(s_in, "s_in", where), _scale(s_out, "s_out", where)
    zi, zo = _zero_point(z_in, "z_in", where), _zero_point(z_out, "z_out", where)
    return _lut(si, zi, so, zo, transform)


def gelu_int8(x, p: LutParams):
    """GELU: ``y = table[x + 128]`` (LiteRT's ``LUTLookup``); ``output_saturated`` counts the
    codes whose table entry was clamped at an int8 rail.

    >>> y, c = gelu_int8(np.array([-128, 0, 127]), gelu_params(0.05, 0, 0.02, -10))
    >>> y.tolist(), c["output_saturated"]  # x = -6.4, 0, 6.35 -> 6.35 / 0.02 = 317.5: clamped
    ([-10, -10, 127], 1)
    """
    if not isinstance(p, LutParams):
        raise InvalidInputError(f"gelu_int8: p must be LutParams, got {type(p).__name__}")
    return _lookup(x, p, "gelu_int8")
