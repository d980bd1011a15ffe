"""SDP passes of the FP16 lowering: registers with ``PROC/OUT_PRECISION = 2`` and fp16 operands.

An :class:`Fp16Pass` is one SDP pass in FP16 (:func:`~quantemu.backends.nvdla.fp16.sdp.sdp_fp16`):
its registers, and its per-channel operands as fp16 words (bias, batch-norm scale and offset,
PReLU slopes) that the SDP reads from memory along the channel axis. The input is fp16 words from
memory (``uint16``) or the fp32 words CACC sends (``uint32``); the output is fp16 words.
:func:`activation_fields` programs a fused activation into the units a pass leaves free: ReLU in
BN's ReLU, LeakyRelu as BN's PReLU multiply by the register slope, Clip as BN ALU MAX (the lower
bound, an fp16 register) then EW ALU MIN (the upper bound, an fp32 register).
:class:`Fp16SdpLayer` is a layer made of such passes over one fp16 input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from quantemu.backends.nvdla.fp16.sdp import sdp_fp16
from quantemu.backends.nvdla.lower.sdp import lut_counters
from quantemu.backends.nvdla.registers import AluAlgo, OperandSource, SdpRegisters
from quantemu.backends.nvdla.registers.types import Precision
from quantemu.backends.nvdla.results import SdpResult
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Attrs
from quantemu.program import Encoding, Layer, LayerOutput, QTensor

FP16_REGS = {"PROC_PRECISION": int(Precision.FP16), "OUT_PRECISION": int(Precision.FP16)}
MINUS_ONE_FP16 = 0xBC00  # -1.0: an exact negation in the X units' multiplier
MINUS_ONE_FP32 = 0xBF800000  # -1.0 as the EW unit's fp32 register operand


def fp16_word(v: float) -> int:
    """The fp16 word nearest ``v`` (round to nearest even; beyond ±65504 it is ±Inf)."""
    with np.errstate(over="ignore"):
        return int(np.float32(v).astype(np.float16).view(np.uint16))


def fp32_word(v: float) -> int:
    """The fp32 word of ``v`` (round to nearest even)."""
    return int(np.float32(v).view(np.uint32))


def fp16_words(values) -> np.ndarray:
    """Float values as fp16 words (``uint16``, round to nearest even, as the compiler converts
    weights and operands)."""
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float32).astype(np.float16).view(np.uint16)


@dataclass(frozen=True)
class Fp16Pass:
    """One FP16 SDP pass: registers and per-channel operands (fp16 words, one per channel)."""

    regs: SdpRegisters
    channel_operands: Mapping[str, np.ndarray] = field(default_factory=dict)
    lut: tuple[np.ndarray, np.ndarray] | None = None  # (LE 65, LO 257) fp16 tables

    def __post_init__(self) -> None:
        ops = {
            k: np.asarray(v, dtype=np.uint16).reshape(-1) for k, v in self.channel_operands.items()
        }
        for v in ops.values():
            v.setflags(write=False)
        object.__setattr__(self, "channel_operands", MappingProxyType(ops))

    def run(self, x: np.ndarray, element: Mapping[str, np.ndarray] | None = None) -> SdpResult:
        """The pass on ``x`` (``[N, C, ...]`` fp16 or fp32 words); ``element`` operands (the EW
        input, already of ``x``'s shape or broadcastable to it) by operand name."""
        shape = (1, -1) + (1,) * (x.ndim - 2)
        operands = {k: v.reshape(shape) for k, v in self.channel_operands.items()}
        operands.update(element or {})
        le, lo = self.lut if self.lut is not None else (None, None)
        return sdp_fp16(x, self.regs, operands, le, lo)


def run_passes(passes: Sequence[Fp16Pass], x: np.ndarray, element=None):
    """``x`` through ``passes`` (``element`` operands go to the first): fp16 words (``uint16``)
    and the passes' results."""
    results = []
    for i, p in enumerate(passes):
        r = p.run(x, element if i == 0 else None)
        results.append(r)
        x = r.y.view(np.uint16)
    return x, results


def fp16_counters(results: Sequence[SdpResult], *, lut: bool = False) -> dict[str, int]:
    """Report counters of FP16 SDP passes: ``output_saturated`` (``OUT_SATURATION``: words of
    ±65504), ``nan_outputs``, ``nan_inputs`` and ``inf_inputs`` (the NaN/Inf status registers),
    and with ``lut`` the five LUT counters."""
    out = {
        "output_saturated": sum(r.OUT_SATURATION for r in results),
        "nan_outputs": sum(r.STATUS_NAN_OUTPUT_NUM for r in results),
        "nan_inputs": sum(r.STATUS_NAN_INPUT_NUM for r in results),
        "inf_inputs": sum(r.STATUS_INF_INPUT_NUM for r in results),
    }
    if lut:
        out.update(lut_counters(results))
    return out


def nan_inf_counts(words: np.ndarray) -> dict[str, int]:
    """``nan_inputs`` and ``inf_inputs``: the NaN and ±Inf words among fp16 ``words``."""
    w = np.asarray(words).astype(np.uint16, copy=False)
    top = (w & 0x7C00) == 0x7C00
    frac = (w & 0x03FF) != 0
    return {
        "nan_inputs": int(np.count_nonzero(top & frac)),
        "inf_inputs": int(np.count_nonzero(top & ~frac)),
    }


def activation_fields(attrs: Attrs | Mapping, kind: str | None) -> dict[str, int]:
    """Registers applying activation ``kind`` (``relu``, ``clip``, ``leaky_relu`` or None) with
    the BN unit (and EW's ALU for Clip's upper bound); ``attrs`` holds its parameters as the
    graph's fused attributes (``activation_min``/``_max``/``_alpha``) name them."""
    if kind is None:
        return {}
    if kind == "relu":
        return {"BN_BYPASS": 0, "BN_RELU_BYPASS": 0}
    if kind == "leaky_relu":
        alpha = fp16_word(float(attrs["activation_alpha"]))
        return {"BN_BYPASS": 0, "BN_MUL_BYPASS": 0, "BN_MUL_PRELU": 1,
                "BN_MUL_SRC": int(OperandSource.REGISTER), "BN_MUL_OPERAND": alpha}  # fmt: skip
    if kind == "clip":
        lo, hi = float(attrs["activation_min"]), float(attrs["activation_max"])
        return {
            "BN_BYPASS": 0, "BN_ALU_BYPASS": 0, "BN_ALU_ALGO": int(AluAlgo.MAX),
            "BN_ALU_SRC": int(OperandSource.REGISTER), "BN_ALU_OPERAND": fp16_word(lo),
            "EW_BYPASS": 0, "EW_ALU_BYPASS": 0, "EW_ALU_ALGO": int(AluAlgo.MIN),
            "EW_ALU_SRC": int(OperandSource.REGISTER), "EW_ALU_OPERAND": fp32_word(hi),
        }  # fmt: skip
    raise UnsupportedError(f"nvdla FP16 lowering: no SDP programming for activation {kind!r}")


def activation_of(op_type: str, attrs: Attrs | Mapping) -> tuple[str | None, dict]:
    """A standalone Relu / Clip / LeakyRelu node as ``(kind, fused-style attrs)``."""
    if op_type == "Relu":
        return "relu", {}
    if op_type == "LeakyRelu":
        return "leaky_relu", {"activation_alpha": attrs["alpha"]}
    lo, hi = attrs.get("min"), attrs.get("max")
    lo = float(np.finfo(np.float32).min if lo is None else lo)
    hi = float(np.finfo(np.float32).max if hi is None else hi)
    return "clip", {"activation_min": lo, "activation_max": hi}


def fp16_pass(fields: Mapping[str, int], operands: Mapping[str, np.ndarray] | None = None,
              lut: tuple[np.ndarray, np.ndarray] | None = None):  # fmt: skip
    """An :class:`Fp16Pass` with ``fields`` on top of the FP16 precisions."""
    return Fp16Pass(SdpRegisters(**FP16_REGS, **fields), dict(operands or {}), lut)


@dataclass(frozen=True, kw_only=True)
class Fp16SdpLayer(Layer):
    """SDP passes over one fp16 input (activations, standalone BatchNormalization), with the
    seed's SDP check (bit identity with the local float reference, :mod:`.check`)."""

    encoding: Encoding
    passes: tuple[Fp16Pass, ...]
    check: object  # a .check.Fp16Check

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The passes; the counters; the threshold check."""
        y, results = run_passes(self.passes, np.asarray(inputs[0].codes))
        counters = fp16_counters(results, lut=any(p.lut is not None for p in self.passes))
        counters.update(self.check.sdp(y, inputs))
        return LayerOutput(QTensor(y, self.encoding), counters)
