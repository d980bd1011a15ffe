"""The SDP FP16 pipeline, as NVIDIA's C model computes it (``conformance/nvdla-fp16/README.md``).

Data are fp32 words inside the SDP and fp17 in the LUT interpolation; every operation is the
cmod's own (:mod:`quantemu.intmath.nvdla_float`), not IEEE 754. In order (cmod ``sdp_x.cpp``,
``sdp_y_core.cpp``, ``sdp_y_cvt.cpp``, ``sdp_y_idx.cpp``, ``sdp_y_inp.cpp``, ``sdp_c.cpp`` and
``sdp_hls_wrapper.cpp`` of nvdla/hw ``nvdlav1`` @ ``8e06b1b9``):

1. Input: fp16 words from memory through ``Fp16ToFp32`` (NaN and ±Inf words counted first), or
   fp32 words from CACC as they are; with ``NAN_TO_ZERO`` an fp32 NaN becomes +0.
2. BS, then BN: ALU (MAX, MIN, SUM, and ALGO 3 = the integer word ``!FpEql``: 0 or 1) with an
   fp16 operand (NaN -> +0 with ``NAN_TO_ZERO``, then ``Fp16ToFp32``); MUL (PReLU passes data
   whose sign bit is 0); ReLU. Shift values are ignored.
3. EW: MUL first, then ALU; register operands are fp32 words, memory operands fp16 (NaN flush,
   ``Fp16ToFp32``); its converters and truncate are ignored.
4. LUT: indices from ``FpSub(v, START)`` (linear: ``FpFloatToIntFrac``; LE exponent: the
   unbiased exponent minus the offset), the INT pipeline's table selection and counters, then
   fp17 interpolation (hits) or the slope line from START/END (under/overflow).
5. Output: ``Fp32ToFp16``, then ``Fp16ToInt16`` for INT16 output (a double rounding); compare
   mode gives the low 16 bits of the EW word.

:func:`sdp_fp16` runs them (what :func:`~quantemu.backends.nvdla.sdp.sdp` does for
``PROC_PRECISION = FP16``); the NaN and ±65504 word counts serve the integer pipeline's FP16
output too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from quantemu.backends.nvdla.lut import (
    LE_DEPTH,
    LO_DEPTH,
    OFLOW,
    SDP_COUNTERS,
    UFLOW,
    check_tables,
    classify,
    sdp_counts,
    select_lo,
)
from quantemu.backends.nvdla.operands import check_shape, known_operands, memory_operands
from quantemu.backends.nvdla.registers import (
    AluAlgo,
    LeFunction,
    OperandSource,
    Precision,
    SdpRegisters,
)
from quantemu.backends.nvdla.results import SdpResult
from quantemu.errors import InvalidInputError
from quantemu.intmath import wrap
from quantemu.intmath.nvdla_float import (
    fp16_bit_patterns,
    fp16_to_fp17_nvdla,
    fp16_to_fp32_nvdla,
    fp16_to_int16_round_half_away_sat_nvdla,
    fp17_add_rne_nvdla,
    fp17_mul_rne_nvdla,
    fp17_to_fp32_nvdla,
    fp32_add_rne_nvdla,
    fp32_eql_nvdla,
    fp32_max_nvdla,
    fp32_min_nvdla,
    fp32_mul_rne_nvdla,
    fp32_relu_nvdla,
    fp32_sub_rne_nvdla,
    fp32_to_fp16_rne_sat_nvdla,
    fp32_to_fp17_rne_sat_nvdla,
    fp32_to_int_frac_nvdla,
    fraction_to_fp17_nvdla,
)

_I = np.int64
FRAC_ONE = 1 << 35  # the LUT fraction's unit (yLutFracSize = 35)
FP17_ONE = 0x7C00  # 1.0 in fp17 (bias 31)


@dataclass(frozen=True)
class Fp16Counts:
    """The counters of an FP16 run besides the INT pipeline's."""

    lut: dict
    nan_input: int
    inf_input: int


def nan16(h: np.ndarray) -> np.ndarray:
    """fp16 NaN words (exponent 31, mantissa != 0)."""
    return ((h >> 10) & 0x1F == 0x1F) & ((h & 0x3FF) != 0)


def _nan32(w: np.ndarray) -> np.ndarray:
    return ((w >> 23) & 0xFF == 0xFF) & ((w & 0x7FFFFF) != 0)


def _operand32(h16, nan_to_zero: bool) -> np.ndarray:
    """An fp16 operand word as the units read it: NaN -> +0 (``NAN_TO_ZERO``), ``Fp16ToFp32``."""
    h = np.asarray(h16, dtype=_I) & 0xFFFF
    if nan_to_zero:
        h = np.where(nan16(h), 0, h)
    return fp16_to_fp32_nvdla(h).astype(_I)


def fp_alu(algo: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``FpAlu``: MAX, MIN, SUM (``FpAdd``), and EQL as the word ``!FpEql`` (0 or 1)."""
    if algo == AluAlgo.SUM:
        return fp32_add_rne_nvdla(a, b).astype(_I)
    if algo == AluAlgo.MAX:
        return fp32_max_nvdla(a, b).astype(_I)
    if algo == AluAlgo.EQL:
        return 1 - fp32_eql_nvdla(a, b).astype(_I)
    return fp32_min_nvdla(a, b).astype(_I)


def _prelu_mul(v: np.ndarray, op: np.ndarray, prelu: bool) -> np.ndarray:
    product = fp32_mul_rne_nvdla(v, op).astype(_I)
    return np.where((v >> 31) == 0, v, product) if prelu else product


def x_unit_fp16(v, regs: SdpRegisters, unit: str, mem: dict, nan_to_zero: bool) -> np.ndarray:
    """BS or BN on fp32 words (module docstring, step 2)."""
    u = regs.x_unit(unit)
    if u.bypass:
        return v
    if not u.alu_bypass:
        op = mem[f"{unit}_ALU"] if u.alu_src is OperandSource.MEMORY else u.alu_operand
        v = fp_alu(getattr(regs, f"{unit}_ALU_ALGO"), v, _operand32(op, nan_to_zero))
    if not u.mul_bypass:
        op = mem[f"{unit}_MUL"] if u.mul_src is OperandSource.MEMORY else u.mul_operand
        v = _prelu_mul(v, _operand32(op, nan_to_zero), u.mul_prelu)
    if not u.relu_bypass:
        v = fp32_relu_nvdla(v).astype(_I)
    return v


def y_unit_fp16(v, regs: SdpRegisters, mem: dict, nan_to_zero: bool) -> np.ndarray:
    """EW without its LUT on fp32 words (step 3): MUL first, then ALU."""
    u = regs.y_unit()

    def operand(src: OperandSource, reg: int, name: str) -> np.ndarray:
        if src is OperandSource.REGISTER:
            return np.asarray(reg & 0xFFFFFFFF, dtype=_I)  # an fp32 word, no NaN flush
        return _operand32(mem[name], nan_to_zero)

    if not u.mul_bypass:
        v = _prelu_mul(v, operand(u.mul_src, u.mul_operand, "EW_MUL"), u.mul_prelu)
    if not u.alu_bypass:
        v = fp_alu(regs.EW_ALU_ALGO, v, operand(u.alu_src, u.alu_operand, "EW_ALU"))
    return v


def _index(d: np.ndarray, depth: int, *, exponent_offset: int | None, select: int):
    """One table's ``(uflow, oflow, index, fraction)`` from ``d = FpSub(v, START)``."""
    sign, expo, mant = (d >> 31) & 1, (d >> 23) & 0xFF, d & 0x7FFFFF
    bad = (sign == 1) | ((expo == 0) & (mant == 0)) | ((expo == 0xFF) & (mant != 0))
    if exponent_offset is not None:
        e = expo - 127
        uflow = bad | (e < exponent_offset)
        integer = e - exponent_offset
        frac = mant << 12
    else:
        integer, frac = (a.astype(_I) for a in fp32_to_int_frac_nvdla(d, select))
        uflow = bad
    oflow = ~uflow & (integer >= depth - 1)
    hit = ~uflow & ~oflow
    index = np.where(uflow, 0, np.where(oflow, depth - 1, integer))
    return uflow, oflow, index, np.where(hit, frac, 0)


def _select(le, lo, cfg):
    """The table choice (``sdp_y_idx.cpp``; the INT pipeline's rule, :func:`..lut.select_lo`):
    ``(lo_chosen, kinds, index, fraction)`` per element, ``kinds`` the picked table's, LE's and
    LO's classification."""
    (le_u, le_o, le_i, le_f), (lo_u, lo_o, lo_i, lo_f) = le, lo
    le_kind, lo_kind = classify(le_u, le_o), classify(lo_u, lo_o)
    lo_chosen = select_lo(le_kind, lo_kind, cfg)
    kinds = (np.where(lo_chosen, lo_kind, le_kind), le_kind, lo_kind)
    return lo_chosen, kinds, np.where(lo_chosen, lo_i, le_i), np.where(lo_chosen, lo_f, le_f)


def lut_fp16(v, regs: SdpRegisters, le_table, lo_table) -> tuple[np.ndarray, dict]:
    """The hybrid LUT on fp32 words (step 4): its output words and counters."""
    cfg = regs.lut()
    words = {n: getattr(regs, f"LUT_{n}") for n in ("LE_START", "LE_END", "LO_START", "LO_END")}
    exponent = cfg.le_function is LeFunction.EXPONENT
    le = _index(
        fp32_sub_rne_nvdla(v, words["LE_START"]).astype(_I),
        LE_DEPTH,
        exponent_offset=cfg.le_index_offset if exponent else None,
        select=cfg.le_index_select,
    )
    lo = _index(
        fp32_sub_rne_nvdla(v, words["LO_START"]).astype(_I),
        LO_DEPTH,
        exponent_offset=None,
        select=cfg.lo_index_select,
    )
    lo_chosen, kinds, index, frac = _select(le, lo, cfg)
    uflow, oflow = kinds[0] == UFLOW, kinds[0] == OFLOW
    tables = np.concatenate([np.asarray(le_table, _I), np.asarray(lo_table, _I)]) & 0xFFFF
    base = np.where(lo_chosen, LE_DEPTH, 0)
    y0 = tables[base + index]
    flow = uflow | oflow
    y1 = tables[base + np.where(flow, index, index + 1)]
    hit_out = _interpolate(frac, y0, y1)
    flow_out = _slope(v, y0, (lo_chosen, uflow, oflow), regs, exponent)
    return np.where(flow, flow_out, hit_out), sdp_counts(*kinds)


def _interpolate(frac, y0, y1) -> np.ndarray:
    """A hit: ``a0·y0 + a1·y1`` in fp17 with ``a1 = frac``, ``a0 = 1 - frac`` (``sdp_y_inp``)."""
    a0 = np.where(frac == 0, FP17_ONE, fraction_to_fp17_nvdla(FRAC_ONE - frac)).astype(_I)
    a1 = fraction_to_fp17_nvdla(frac).astype(_I)
    b0 = fp17_mul_rne_nvdla(a0, fp16_to_fp17_nvdla(y0))
    b1 = fp17_mul_rne_nvdla(a1, fp16_to_fp17_nvdla(y1))
    return fp17_to_fp32_nvdla(fp17_add_rne_nvdla(b0, b1)).astype(_I)


def _slope(v, y0, choice, regs: SdpRegisters, exponent: bool) -> np.ndarray:
    """Under/overflow: ``y0 + (v - (REF + bias)) · SCALE`` in fp17 (``sdp_y_inp``), REF the
    table's START (underflow) or END (overflow), ``bias = 2^LE_INDEX_OFFSET`` for LE exponent
    underflow (the wrapper's fp32 ``pow``), SCALE an fp16 word; the slope shifts are unused."""
    lo_chosen, uflow, oflow = choice
    scale = np.select(
        [~lo_chosen & oflow, ~lo_chosen, oflow],
        [regs.LUT_LE_SLOPE_OFLOW_SCALE, regs.LUT_LE_SLOPE_UFLOW_SCALE,
         regs.LUT_LO_SLOPE_OFLOW_SCALE],
        regs.LUT_LO_SLOPE_UFLOW_SCALE,
    )  # fmt: skip
    ref = np.select(
        [~lo_chosen & oflow, ~lo_chosen, oflow],
        [regs.LUT_LE_END, regs.LUT_LE_START, regs.LUT_LO_END],
        regs.LUT_LO_START,
    )
    offset = regs.signed("LUT_LE_INDEX_OFFSET")
    pow2 = int(np.float32(2.0**offset).view(np.uint32))
    bias = np.where(~lo_chosen & uflow & exponent, pow2, 0)
    a = fp32_to_fp17_rne_sat_nvdla(fp32_sub_rne_nvdla(v, fp32_add_rne_nvdla(ref, bias)))
    b = fp17_mul_rne_nvdla(a, fp16_to_fp17_nvdla(scale))
    return fp17_to_fp32_nvdla(fp17_add_rne_nvdla(fp16_to_fp17_nvdla(y0), b)).astype(_I)


def run_fp16(x, regs: SdpRegisters, mem: dict, lut: tuple) -> tuple[np.ndarray, Fp16Counts]:
    """Steps 1-4 on ``x`` (fp16 words as uint16, or fp32 words as uint32): the EW's fp32 words
    and the counters."""
    nan_to_zero = bool(regs.NAN_TO_ZERO)
    if x.dtype == np.uint16:
        h = x.astype(_I)
        exp31 = (h >> 10) & 0x1F == 0x1F
        nan_in, inf_in = (
            int(np.count_nonzero(nan16(h))),
            int(np.count_nonzero(exp31 & (h & 0x3FF == 0))),
        )
        v = fp16_to_fp32_nvdla(h).astype(_I)
    else:
        v, nan_in, inf_in = x.astype(_I), 0, 0
    if nan_to_zero:
        v = np.where(_nan32(v), 0, v)
    v = x_unit_fp16(v, regs, "BS", mem, nan_to_zero)
    v = x_unit_fp16(v, regs, "BN", mem, nan_to_zero)
    lut_counts = dict.fromkeys(SDP_COUNTERS, 0)
    if not regs.EW_BYPASS:
        v = y_unit_fp16(v, regs, mem, nan_to_zero)
        if not regs.EW_LUT_BYPASS:
            v, lut_counts = lut_fp16(v, regs, *lut)
    return v, Fp16Counts(lut_counts, nan_in, inf_in)


def output_fp16(v, regs: SdpRegisters) -> np.ndarray:
    """Step 5: the 16-bit output word (int16) of fp32 words ``v``."""
    h = fp32_to_fp16_rne_sat_nvdla(v)
    if regs.out_precision is Precision.INT16:
        return fp16_to_int16_round_half_away_sat_nvdla(h)
    return h.view(np.int16)


def nan_outputs(y: np.ndarray) -> int:
    """``STATUS_NAN_OUTPUT_NUM``: FP16 output words with the NaN pattern (exponent 31, mantissa
    != 0), compare-mode words included; INT16 output words are not counted."""
    return int(np.count_nonzero(nan16(np.asarray(y).astype(_I) & 0xFFFF)))


def saturated_fp16(y: np.ndarray) -> int:
    """``OUT_SATURATION`` for FP16 output: words equal to ±65504 (``& 0x7fff == 0x7bff``)."""
    return int(np.count_nonzero((np.asarray(y).astype(_I) & 0x7FFF) == 0x7BFF))


def _words(a, name: str, shape=None) -> np.ndarray:
    """fp16 data as uint16 bit patterns (:func:`fp16_bit_patterns`), shape checked."""
    words = fp16_bit_patterns(a, f"sdp: {name} in FP16 mode")
    if shape is not None:
        check_shape(words.shape, name, shape)
    return words.astype(np.uint16)


def _input(x) -> np.ndarray:
    """X in FP16 mode: fp16 words from memory (float16: uint16 patterns) or fp32 words from
    CACC (float32: uint32 patterns)."""
    arr = np.asarray(x)
    if arr.dtype == np.float32:
        return arr.view(np.uint32)
    if arr.dtype in (np.float16, np.uint16):
        return arr.view(np.uint16)
    if arr.dtype == np.uint32:
        return arr
    raise InvalidInputError(
        f"sdp: X must be float16 (fp16 words from memory) or float32 (fp32 words from CACC) "
        f"when PROC_PRECISION = FP16, got {arr.dtype}"
    )


def sdp_fp16(x, regs: SdpRegisters, operands: Mapping | None, lut_le, lut_lo) -> SdpResult:
    """The SDP with ``PROC_PRECISION = FP16`` (steps 1-5), what
    :func:`~quantemu.backends.nvdla.sdp.sdp` runs for it: ``x`` is fp16 words from memory
    (float16, or raw uint16) or the fp32 words CACC sends (float32, or raw uint32); the
    ``operands`` (arrays by name, as for ``sdp``) and the LUT tables (None when the LUT is
    bypassed) are fp16. ``y`` is the output word.
    """
    operands = known_operands(operands)
    if regs.proc_precision is not Precision.FP16:
        raise InvalidInputError(
            f"sdp_fp16: PROC_PRECISION = {regs.PROC_PRECISION}, not 2 (FP16); sdp() runs either"
        )
    xa = _input(x)
    mem = memory_operands(operands, lambda a, n: _words(a, n, xa.shape), np.zeros((), np.uint16))
    tables = (None, None)
    if regs.lut_active:
        words = [
            None if t is None else _words(t, "LUT table").view(np.int16) for t in (lut_le, lut_lo)
        ]
        tables = check_tables(*words, "sdp")
    v, counts = run_fp16(xa, regs, mem, tables)
    y = output_fp16(v, regs)
    unequal = 0
    if regs.compare_mode:
        y = wrap(v, 16).astype(np.int16)
        unequal = int(np.any(y != 0))
    fp16_out = regs.out_precision is Precision.FP16
    return SdpResult(
        y=np.asarray(y, dtype=np.int16),
        OUT_SATURATION=saturated_fp16(y) if fp16_out else 0,
        STATUS_UNEQUAL=unequal,
        STATUS_NAN_INPUT_NUM=counts.nan_input,
        STATUS_INF_INPUT_NUM=counts.inf_input,
        STATUS_NAN_OUTPUT_NUM=nan_outputs(y) if fp16_out else 0,
        fp16=True,
        **counts.lut,
    )
