"""The random SDP FP16 cases of ``tools/make_nvdla_fp16_vectors.py``: register fields, the
kinds of case in the shared suite's proportions, and their deliberate edge cases.

Kept apart from the generator (which builds NVIDIA's cmod and runs it) so that each file has one
concern; nothing here computes an expected value.
"""

from __future__ import annotations

import math
import random

import numpy as np

_UNIT_FIELDS = """
    BYPASS 1 ALU_BYPASS 1 ALU_ALGO 2 ALU_SRC 1 ALU_OPERAND 16 ALU_SHIFT_VALUE 6 MUL_BYPASS 1
    MUL_SRC 1 MUL_OPERAND 16 MUL_PRELU 1 MUL_SHIFT_VALUE 8 RELU_BYPASS 1
"""
_EW_LUT_CVT_FIELDS = """
    EW_BYPASS 1 EW_ALU_BYPASS 1 EW_ALU_ALGO 2 EW_ALU_SRC 1 EW_ALU_OPERAND 32
    EW_ALU_CVT_BYPASS 1 EW_ALU_CVT_OFFSET 32 EW_ALU_CVT_SCALE 16 EW_ALU_CVT_TRUNCATE 6
    EW_MUL_BYPASS 1 EW_MUL_SRC 1 EW_MUL_OPERAND 32 EW_MUL_PRELU 1
    EW_MUL_CVT_BYPASS 1 EW_MUL_CVT_OFFSET 32 EW_MUL_CVT_SCALE 16 EW_MUL_CVT_TRUNCATE 6
    EW_TRUNCATE 10 EW_LUT_BYPASS 1
    LUT_LE_FUNCTION 1 LUT_LE_START 32 LUT_LE_END 32 LUT_LE_INDEX_OFFSET 8 LUT_LE_INDEX_SELECT 8
    LUT_LO_START 32 LUT_LO_END 32 LUT_LO_INDEX_SELECT 8
    LUT_HYBRID_PRIORITY 1 LUT_UFLOW_PRIORITY 1 LUT_OFLOW_PRIORITY 1
    LUT_LE_SLOPE_UFLOW_SCALE 16 LUT_LE_SLOPE_UFLOW_SHIFT 5
    LUT_LE_SLOPE_OFLOW_SCALE 16 LUT_LE_SLOPE_OFLOW_SHIFT 5
    LUT_LO_SLOPE_UFLOW_SCALE 16 LUT_LO_SLOPE_UFLOW_SHIFT 5
    LUT_LO_SLOPE_OFLOW_SCALE 16 LUT_LO_SLOPE_OFLOW_SHIFT 5
    CVT_OFFSET 32 CVT_SCALE 16 CVT_SHIFT 6
"""
# The attrs, in the order of the shared vectors, with their raw field widths (nvdla.md 2.1).
_HEAD_FIELDS = "PROC_PRECISION 2 OUT_PRECISION 2 NAN_TO_ZERO 1"
_FIELD_TOKENS = (
    _HEAD_FIELDS.split()
    + [f"{unit}_{t}" if t.isupper() else t for unit in ("BS", "BN") for t in _UNIT_FIELDS.split()]
    + _EW_LUT_CVT_FIELDS.split()
)
FIELDS: tuple[tuple[str, int], ...] = tuple(
    (name, int(width)) for name, width in zip(_FIELD_TOKENS[::2], _FIELD_TOKENS[1::2], strict=True)
)
WIDTH = dict(FIELDS)
OPERANDS = ("BS_ALU", "BS_MUL", "BN_ALU", "BN_MUL", "EW_ALU", "EW_MUL")
COUNTERS = (
    "OUT_SATURATION",
    "LUT_UFLOW",
    "LUT_OFLOW",
    "LUT_HYBRID",
    "LUT_LE_HIT",
    "LUT_LO_HIT",
    "STATUS_UNEQUAL",
    "STATUS_NAN_INPUT_NUM",
    "STATUS_INF_INPUT_NUM",
    "STATUS_NAN_OUTPUT_NUM",
)
LE_DEPTH, LO_DEPTH = 65, 257
# Kinds of case and their number in 150 cases (the README's table).
KINDS = {
    "passthrough": 19,
    "x_alu": 13,
    "x_mul": 12,
    "x_chain": 16,
    "ew": 15,
    "ew_cmp": 13,
    "lut": 21,
    "out_int16": 15,
    "full": 16,
    "int_fp16": 10,
}
FP16, INT16, INT8 = 2, 1, 0


def f16(x: float) -> int:
    """The fp16 pattern of ``x`` (IEEE round to nearest even; overflow gives Inf)."""
    with np.errstate(over="ignore"):
        return int(np.array(x, dtype=np.float64).astype(np.float16).view(np.uint16))


def f16_sat(x: float) -> int:
    """``x`` as fp16, clipped to +-65504 first (table entries and slopes of realistic setups)."""
    if math.isnan(x):
        return 0x7E00
    return f16(max(-65504.0, min(65504.0, x)))


def f16_value(w: int) -> float:
    return float(np.array(w, dtype=np.uint16).view(np.float16))


def f32(x: float) -> int:
    """The fp32 pattern of ``x`` (IEEE round to nearest even; overflow gives Inf)."""
    with np.errstate(over="ignore"):
        return int(np.array(x, dtype=np.float64).astype(np.float32).view(np.uint32))


def f32_value(w: int) -> float:
    return float(np.array(w, dtype=np.uint32).view(np.float32))


def f32_next(w: int, up: bool) -> int:
    """The fp32 pattern one ulp above/below the finite value ``w`` (toward +-inf)."""
    x = np.array(w, dtype=np.uint32).view(np.float32)
    target = np.float32(np.inf if up else -np.inf)
    return int(np.nextafter(x, target).view(np.uint32))


def s8(v: int) -> int:
    """A signed 8-bit register value as its raw field."""
    return v & 0xFF


def u32(v: int) -> int:
    return v & 0xFFFFFFFF


# --- value pools ---------------------------------------------------------------------------------

FP16_SPECIALS = (
    0x0000, 0x8000, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00,  # +-0, +-65504, +-Inf
    0x0001, 0x8001, 0x03FF, 0x83FF, 0x0200, 0x0400, 0x8400,  # subnormals, min normal
    0x3C00, 0xBC00, 0x3800, 0xB800, 0x3E00, 0xBE00, 0x4100, 0xC100,  # 1, 0.5, 1.5, 2.5
    0x7800, 0xF800, 0x77FF, 0xF801, 0x6800, 0x6801,  # 32768, 32752, 2048, 2049
    0x7E00, 0xFE00, 0x7C01, 0xFC01, 0x7DFF, 0x7FFF, 0xFFFF, 0x7D55,  # NaNs with payloads
)  # fmt: skip
FP32_SPECIAL_VALUES = (
    0.0, -0.0, math.inf, -math.inf, 3.4028234663852886e38, -3.4028234663852886e38,
    65504.0, -65504.0, 65519.99609375, -65519.99609375, 65520.0, -65520.0, 65535.0, 65536.0,
    100000.0, -100000.0, 1e10, 1e30, -5e34, 32767.0, 32767.5, 32768.0, -32768.0, -32768.5,
    -32769.0, 0.5, 1.5, 2.5, -0.5, -2.5, 2.0**-24, -(2.0**-24), 2.0**-25, -(2.0**-25),
    3 * 2.0**-25, 2.0**-26, 1e-10, 2.0**-14, 2.0**-15, 1e-39, -9e-40, 2.0**-149, 2.0**-127,
    -(2.0**-126),
)  # fmt: skip
FP32_REG_SPECIALS = (
    0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFA00123, 0x7FC003FF, 0x7F8003FF,  # NaNs
    0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF,  # +-Inf, +-FLT_MAX
    0x00000001, 0x807FFFFF, 0x00400000,  # fp32 subnormals
    0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x477FE000, 0x47800000,  # 65504, 65536
    0x7149F2CA, 0x0DA24260,  # 1e30, 1e-30
)  # fmt: skip


class Gen:
    """The random choices of one case set, all drawn from ``random.Random(seed)``."""

    def __init__(self, seed: int):
        self.r = random.Random(seed)

    # small helpers
    def bit(self, p: float = 0.5) -> int:
        return 1 if self.r.random() < p else 0

    def pick(self, seq):
        return seq[self.r.randrange(len(seq))]

    def raw(self, bits: int) -> int:
        return self.r.getrandbits(bits)

    def typical(self, lo: float = -3.0, hi: float = 3.0) -> float:
        """A Gaussian value of random decade 10^[lo, hi]."""
        return self.r.gauss(0.0, 1.0) * 10.0 ** self.r.uniform(lo, hi)

    # fp16 words
    def fp16_nan(self) -> int:
        return (self.bit() << 15) | 0x7C00 | self.r.randint(1, 0x3FF)

    def fp16_word(self, p_special: float = 0.25, lo: float = -3.0, hi: float = 3.0) -> int:
        u = self.r.random()
        if u < p_special * 0.6:
            return self.pick(FP16_SPECIALS)
        if u < p_special * 0.8:
            return (self.bit() << 15) | self.r.randint(1, 0x3FF)  # subnormal
        if u < p_special * 0.9:
            return self.fp16_nan()
        if u < p_special:
            return self.raw(16)
        return f16_sat(self.typical(lo, hi))

    def fp16_words(self, n: int, **kw) -> list[int]:
        return [self.fp16_word(**kw) for _ in range(n)]

    # fp32 words (never NaN: X from CACC travels as a JSON float32)
    def fp32_tie(self) -> int:
        """An exact fp16 rounding tie (normal or subnormal range), or one fp32 ulp beside it."""
        if self.bit(0.3):
            k = self.r.randint(0, 1023)  # subnormal range: (k + 1/2) * 2^-24
            w = f32((k + 0.5) * 2.0**-24)
        else:
            a = self.r.randint(0x0400, 0x7BFE)  # a normal fp16 and the next one
            w = f32((f16_value(a) + f16_value(a + 1)) / 2)
        w |= self.bit() << 31
        d = self.r.randrange(3)
        return w if d == 0 else f32_next(w, d == 1)

    def fp32_word(self, p_special: float = 0.3, lo: float = -3.0, hi: float = 4.0) -> int:
        u = self.r.random()
        if u < p_special * 0.45:
            return f32(self.pick(FP32_SPECIAL_VALUES))
        if u < p_special * 0.8:
            return self.fp32_tie()
        if u < p_special * 0.9:
            w = f32(self.pick((65504.0, 65520.0, 2.0**-25, 2.0**-24, 32767.5)))
            return f32_next(w, self.bit() == 1) | (self.bit() << 31)
        if u < p_special:
            return (self.bit() << 31) | self.r.randint(1, 0x7FFFFF)  # fp32 subnormal
        return f32(self.typical(lo, hi))

    def fp32_reg(self, p_special: float = 0.3, lo: float = -3.0, hi: float = 3.0) -> int:
        """A 32-bit EW register operand: any fp32 word, NaNs with payloads included."""
        u = self.r.random()
        if u < p_special * 0.7:
            return self.pick(FP32_REG_SPECIALS)
        if u < p_special:
            return self.raw(32)
        return f32(self.typical(lo, hi))


# --- the pieces of a case ------------------------------------------------------------------------


class Case:
    """One case under construction: attrs, X, operands, LUT tables, note."""

    def __init__(self, g: Gen):
        self.g = g
        self.attrs = {name: g.raw(width) for name, width in FIELDS}  # unused fields stay random
        self.n = g.pick((16, 32, 48, 64))
        self.x_dtype = "float16"
        self.x: list[int] = []
        self.ops: dict[str, list[int]] = {}
        self.lut: tuple[list[int], list[int]] | None = None
        self.tags: list[str] = []

    def set(self, **fields) -> None:
        for name, value in fields.items():
            if name not in WIDTH or not 0 <= value < (1 << WIDTH[name]):
                raise ValueError(f"{name}={value} out of its field")
            self.attrs[name] = value

    @property
    def fp16_proc(self) -> bool:
        return self.attrs["PROC_PRECISION"] == FP16


def fp16_x_unit(c: Case, unit: str, alu: bool | None = None, mul: bool | None = None) -> None:
    """An active BS or BN unit in FP16: ALU/MUL on (True), off (False) or random (None)."""
    g = c.g
    alu = g.bit(0.7) == 1 if alu is None else alu
    mul = g.bit(0.6) == 1 if mul is None else mul
    c.set(**{f"{unit}_BYPASS": 0, f"{unit}_ALU_BYPASS": int(not alu)})
    c.set(**{f"{unit}_MUL_BYPASS": int(not mul), f"{unit}_RELU_BYPASS": g.bit(0.6)})
    if alu:
        src = g.bit(0.4)
        algo = g.pick((0, 1, 2, 2, 2, 3))
        c.set(**{f"{unit}_ALU_SRC": src, f"{unit}_ALU_ALGO": algo})
        c.set(**{f"{unit}_ALU_OPERAND": g.fp16_word(0.3)})
        if src:
            c.ops[f"{unit}_ALU"] = g.fp16_words(c.n, p_special=0.3)
    if mul:
        src, prelu = g.bit(0.4), g.bit(0.35)
        c.set(**{f"{unit}_MUL_SRC": src, f"{unit}_MUL_PRELU": prelu})
        c.set(**{f"{unit}_MUL_OPERAND": _mul_operand(g, prelu)})
        if src:
            c.ops[f"{unit}_MUL"] = [_mul_operand(g, prelu) for _ in range(c.n)]


def _mul_operand(g: Gen, prelu: int) -> int:
    """A multiplier operand: negative slopes for PReLU, large ones (overflow) now and then."""
    u = g.r.random()
    if prelu and u < 0.5:
        return f16(-g.pick((0.1, 0.25, 0.01, 0.2, 1.0, 3.0, 0.0)))  # negative PReLU slopes
    if u < 0.15:
        return g.pick((0x7BFF, 0xFBFF, 0x7800, 0x6400, 0x7C00, 0x0001))  # 65504, 32768, 1024...
    return g.fp16_word(0.2, -2.0, 2.0)


def fp16_ew(c: Case, alu: bool | None = None, mul: bool | None = None, algo=None) -> None:
    """An active EW unit in FP16 (LUT bypassed unless the caller sets it)."""
    g = c.g
    alu = g.bit(0.7) == 1 if alu is None else alu
    mul = g.bit(0.6) == 1 if mul is None else mul
    c.set(EW_BYPASS=0, EW_ALU_BYPASS=int(not alu), EW_MUL_BYPASS=int(not mul), EW_LUT_BYPASS=1)
    if alu:
        src = g.bit(0.45)
        c.set(EW_ALU_SRC=src, EW_ALU_ALGO=g.pick((0, 1, 2, 2, 3)) if algo is None else algo)
        c.set(EW_ALU_OPERAND=g.fp32_reg(0.3))
        if src:
            c.ops["EW_ALU"] = g.fp16_words(c.n, p_special=0.3)
    if mul:
        src, prelu = g.bit(0.45), g.bit(0.3)
        c.set(EW_MUL_SRC=src, EW_MUL_PRELU=prelu)
        if prelu and g.bit():
            c.set(EW_MUL_OPERAND=f32(-g.pick((0.1, 0.25, 0.01, 2.0))))
        else:
            c.set(EW_MUL_OPERAND=g.fp32_reg(0.3, -2.0, 2.0))
        if src:
            c.ops["EW_MUL"] = [_mul_operand(g, prelu) for _ in range(c.n)]


def bypass_all(c: Case) -> None:
    c.set(BS_BYPASS=1, BN_BYPASS=1, EW_BYPASS=1)


def fp16_x_data(c: Case, p_special: float = 0.3, lo: float = -3.0, hi: float = 4.0) -> None:
    """X as fp16 words from memory or fp32 words from CACC, edge cases frequent."""
    g = c.g
    if c.x_dtype == "float16":
        c.x = g.fp16_words(c.n, p_special=p_special, lo=lo, hi=min(hi, 4.8))
        c.tags.append("X fp16 from memory")
    else:
        c.x = [g.fp32_word(p_special, lo, hi) for _ in range(c.n)]
        c.tags.append("X fp32 from CACC")


# --- LUT setups ----------------------------------------------------------------------------------
