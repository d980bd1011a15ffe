"""SDP passes used by the NVDLA lowering: a register block with its per-channel operands.

An :class:`SdpStage` is one SDP pass: :class:`SdpRegisters` derived at lowering time, the
per-channel int16 operands it reads from memory (bias, per-channel scales), the LUT tables when
the LUT runs, and an optional per-element memory operand supplied at run time (the EW input).
:func:`activation_stage` programs a pass that applies a standalone activation (and a rescale)
to int8 codes; :func:`sdp_counters` turns the SDP status registers into report counters.
:class:`SdpLayer` is a layer made of such passes over one int8 input (activations, standalone
BatchNormalization); :func:`channel_constant` reads a constant per-channel operand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from quantemu.backends.nvdla.lower.context import NvdlaContext, exact_split, f32
from quantemu.backends.nvdla.lut_program import LutProgram
from quantemu.backends.nvdla.quantize import ScaleSplit, split_scale
from quantemu.backends.nvdla.registers import AluAlgo, OperandSource, SdpRegisters
from quantemu.backends.nvdla.results import SdpResult
from quantemu.backends.nvdla.sdp import sdp
from quantemu.backends.nvdla.sdp_fast import Fallback, SdpPlan
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Node
from quantemu.intmath import float64_round_half_away_add_truncate
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor

INT8_MIN, INT8_MAX = -128, 127


@dataclass(frozen=True)
class SdpStage:
    """One SDP pass: registers, per-channel operands (int16 along ``axis`` 1), LUT tables."""

    regs: SdpRegisters
    channel_operands: Mapping[str, np.ndarray] = field(default_factory=dict)
    lut: LutProgram | None = None
    # Registers decoded and operands prepared once, for the fused run (sdp_fast).
    _plan: SdpPlan = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ops = {k: np.asarray(v, dtype=np.int16) for k, v in self.channel_operands.items()}
        for v in ops.values():
            v.setflags(write=False)
        object.__setattr__(self, "channel_operands", MappingProxyType(ops))
        object.__setattr__(self, "_plan", SdpPlan.build(self.regs, ops))

    def run(
        self,
        x: np.ndarray,
        element_operands: Mapping[str, np.ndarray] | None = None,
        bound: tuple[int, int] | None = None,
        int8_out: bool = False,
    ):
        """Run the pass on ``x`` (``[N, C, ...]`` int values); returns the :class:`SdpResult`.

        Per-channel operands are shaped ``(1, C, 1, ...)``, which :func:`sdp` broadcasts over
        the batch and the plane (the SDP reads them once per channel); ``element_operands``
        have ``x``'s shape (or broadcast to it). ``bound`` = ``(lo, hi)``, when given, must hold
        every value of ``x`` (the caller proves it); the fused path then skips the range scan.
        Results are :func:`sdp`'s exactly: what the fused path does not cover runs :func:`sdp`.
        ``int8_out``: the fused path may return an 8-bit output as int8 (same values).
        """
        x = np.asarray(x)
        try:
            return self._plan.run(x, element_operands or {}, bound, int8_out)
        except Fallback:
            pass
        ndim = np.ndim(x)
        operands = {
            name: v.reshape((1, -1) + (1,) * (ndim - 2))
            for name, v in self.channel_operands.items()
        }
        operands.update(element_operands or {})
        le = None if self.lut is None else self.lut.le
        lo = None if self.lut is None else self.lut.lo
        return sdp(x, self.regs, operands=operands, lut_le=le, lut_lo=lo)


@dataclass(frozen=True, kw_only=True)
class SdpLayer(Layer):
    """One or more SDP passes over a single int8 input."""

    encoding: LinearEncoding
    stages: tuple[SdpStage, ...]
    lut: bool = False

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Run the passes; counters include the LUT ones when the LUT is active."""
        y, results = run_stages(self.stages, np.asarray(inputs[0].codes))
        counters = sdp_counters(results, lut=self.lut)
        return LayerOutput(QTensor(y.astype(np.int8, copy=False), self.encoding), counters)


def run_stages(
    stages: Sequence[SdpStage], x: np.ndarray, bound: tuple[int, int] | None = None
) -> tuple[np.ndarray, list[SdpResult]]:
    """Run ``stages`` one after the other (the output of one is the int8 input of the next);
    ``bound`` holds every value of ``x`` (see :meth:`SdpStage.run`)."""
    results = []
    for stage in stages:
        # int8 out: the next stage starts from the int8 range, the caller stores int8 codes
        r = stage.run(x, bound=bound, int8_out=True)
        bound = None
        results.append(r)
        x = r.y
    return x, results


def sdp_counters(results: Sequence[SdpResult], *, lut: bool = False) -> dict[str, int]:
    """Report counters summed over the passes of one layer.

    ``output_saturated`` is the SDP's ``OUT_SATURATION`` (the 17-bit converter step, ±1 rule);
    ``output_clamped`` is quantemu's count of values the final int8 clamp changed (no hardware
    register counts it). LUT counters come from ``LUT_UFLOW``/``LUT_OFLOW``/``LUT_HYBRID``/
    ``LUT_LE_HIT``/``LUT_LO_HIT``.
    """
    out = {
        "output_saturated": sum(r.OUT_SATURATION for r in results),
        "output_clamped": sum(r.final_clamped for r in results),
    }
    if lut:
        out.update(lut_counters(results))
    return out


def lut_counters(results: Sequence[SdpResult]) -> dict[str, int]:
    """The five SDP LUT counters summed over passes, by report name."""
    return {
        "lut_underflow": sum(r.LUT_UFLOW for r in results),
        "lut_overflow": sum(r.LUT_OFLOW for r in results),
        "lut_hybrid": sum(r.LUT_HYBRID for r in results),
        "lut_le_hit": sum(r.LUT_LE_HIT for r in results),
        "lut_lo_hit": sum(r.LUT_LO_HIT for r in results),
    }


def converter_fields(factor: float, how: ScaleSplit | None) -> dict[str, int]:
    """Output converter ``CVT_*`` for a float32 factor; identity (1, 0) for exactly 1.

    ``how=None`` uses the exact split (factors quantemu chooses), otherwise the compiler's rule.
    """
    if f32(factor) == 1.0:
        return {"CVT_OFFSET": 0, "CVT_SCALE": 1, "CVT_SHIFT": 0}
    scale, shift = exact_split(factor) if how is None else split_scale(factor, how=how)
    return {"CVT_OFFSET": 0, "CVT_SCALE": scale % (1 << 16), "CVT_SHIFT": shift}


def leaky_fields(unit: str, alpha: float) -> dict[str, int]:
    """X unit ``unit`` (BS or BN) as PReLU with a register slope ``alpha = scale * 2^-shift``.

    Non-negative values pass unchanged; negative ones become ``SHR(x * scale, shift, 32)``.
    """
    scale, shift = exact_split(alpha)
    return {
        f"{unit}_BYPASS": 0,
        f"{unit}_MUL_BYPASS": 0,
        f"{unit}_MUL_SRC": int(OperandSource.REGISTER),
        f"{unit}_MUL_OPERAND": scale % (1 << 16),
        f"{unit}_MUL_PRELU": 1,
        f"{unit}_MUL_SHIFT_VALUE": shift,
    }


def _operand(code: float) -> int:
    """A bound in codes as an int16 register operand (half away, clamped to int16)."""
    rounded = float64_round_half_away_add_truncate(max(-(2.0**16), min(code, 2.0**16)))
    return max(-(2**15), min(2**15 - 1, int(rounded)))


def clip_fields(lo: float, hi: float, scale: float) -> dict[str, int]:
    """``clip(x, lo, hi)`` on codes of ``scale``: BS ALU MAX (lo) and BN ALU MIN (hi) registers.

    The bounds are rounded to codes (half away). A lower bound at or below -128 (an upper one
    at or above 127) never binds on int8 codes and is left out.
    """
    out: dict[str, int] = {}
    lo_code, hi_code = lo / scale, hi / scale
    for unit, code, algo, idle in (
        ("BS", lo_code, AluAlgo.MAX, lo_code <= INT8_MIN),
        ("BN", hi_code, AluAlgo.MIN, hi_code >= INT8_MAX),
    ):
        if idle:
            continue
        out.update({
            f"{unit}_BYPASS": 0,
            f"{unit}_ALU_BYPASS": 0,
            f"{unit}_ALU_ALGO": int(algo),
            f"{unit}_ALU_SRC": int(OperandSource.REGISTER),
            f"{unit}_ALU_OPERAND": _operand(code) % (1 << 16),
        })  # fmt: skip
    return out


def activation_fields(kind: str, attrs: Mapping, scale: float) -> dict[str, int]:
    """X-unit fields applying ``kind`` (``relu``/``clip``/``leaky_relu``) to codes of ``scale``.

    ``attrs`` holds the fused-activation parameters (``activation_min``/``_max``/``_alpha``).
    """
    if kind == "relu":
        return {"BS_BYPASS": 0, "BS_RELU_BYPASS": 0}
    if kind == "leaky_relu":
        return leaky_fields("BS", float(attrs["activation_alpha"]))
    if kind == "clip":
        return clip_fields(float(attrs["activation_min"]), float(attrs["activation_max"]), scale)
    raise ValueError(f"unknown activation {kind!r}")  # the IR holds only these three


def activation_stage(
    kind: str | None, attrs: Mapping, s_in: float, s_out: float, how: ScaleSplit | None = None
) -> SdpStage:
    """An SDP pass over int8 codes of ``s_in``: the activation in the X units, then the output
    converter rescaling to ``s_out`` (identity when the scales are equal)."""
    fields = activation_fields(kind, attrs, s_in) if kind else {}
    fields.update(converter_fields(f32(f32(s_in) / f32(s_out)), how))
    return SdpStage(SdpRegisters(**fields))


def channel_constant(ctx: NvdlaContext, node: Node, name: str) -> np.ndarray:
    """Constant input ``name`` of ``node`` as one value per channel of its first input (axis 1),
    or a clear error."""
    shape = ctx.shape(node.inputs[0])
    channels = shape[1]
    value = ctx.const(name)
    if value is None:
        raise UnsupportedError(f"{node}: {name!r} is computed; the SDP needs it constant")
    v = np.asarray(value, np.float32)
    trailing = v.shape[1:] if v.ndim == len(shape) - 1 else ()
    if v.size == 1 or (v.shape[:1] == (channels,) and all(d == 1 for d in trailing)):
        return np.broadcast_to(v.reshape(-1), (channels,)).astype(np.float32)
    raise UnsupportedError(
        f"{node}: {name!r} has shape {v.shape}; the SDP takes one value per channel "
        f"({channels},) or a scalar"
    )


def prelu_slopes(ctx, node: Node) -> np.ndarray:
    """PRelu's constant slope as one value per channel (axis 1), or a clear error.

    ONNX broadcasts the slope to the input from the right (unidirectionally): exporters write
    ``(C, 1, 1)`` or ``(1, C, 1, 1)`` for a 4-D input, and ``(C,)`` for a 2-D one. A slope is per
    channel when every right-aligned axis but the channel axis has size 1; a ``(C,)`` slope on a
    4-D input runs along the width, which the SDP's per-channel operand cannot hold.
    """
    shape = ctx.shape(node.inputs[0])
    value = ctx.const(node.inputs[1])
    if value is None:
        raise UnsupportedError(f"{node}: a computed PRelu slope is not supported (constant only)")
    v = np.asarray(value, np.float32)
    aligned = (1,) * (len(shape) - v.ndim) + v.shape
    if v.ndim <= len(shape) and len(shape) >= 2:
        others = aligned[:1] + aligned[2:]
        if all(d == 1 for d in others) and aligned[1] in (1, shape[1]):
            return np.broadcast_to(v.reshape(-1), (shape[1],)).astype(np.float32)
    raise UnsupportedError(
        f"{node}: slope of shape {v.shape} on input {tuple(shape)} varies along an axis other "
        f"than the channels; the SDP's PReLU operand is one value or one per channel "
        f"({shape[1]}): give the slope as (C, 1, 1) or (1, C, 1, 1)"
    )
