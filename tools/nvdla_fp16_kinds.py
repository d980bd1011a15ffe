"""The kinds of SDP FP16 case of ``tools/make_nvdla_fp16_vectors.py`` (LUT tables and
registers, the README's kinds in its proportions), on the fields and helpers of
:mod:`nvdla_fp16_cases`; nothing here computes an expected value."""

from __future__ import annotations

import math

from nvdla_fp16_cases import (
    FP16,
    INT8,
    INT16,
    KINDS,
    LE_DEPTH,
    LO_DEPTH,
    OPERANDS,
    Case,
    Gen,
    bypass_all,
    f16,
    f16_sat,
    f16_value,
    f32,
    fp16_ew,
    fp16_x_data,
    fp16_x_unit,
    s8,
    u32,
)

FUNCS = ("sigmoid", "tanh", "exp_neg", "recip", "linear", "random")


def _func(name: str, slope: float):
    def sigmoid(x):
        return 0.5 * (1.0 + math.tanh(x / 2))  # = 1 / (1 + exp(-x)), without overflow

    table = {
        "sigmoid": sigmoid,
        "tanh": math.tanh,
        "exp_neg": lambda x: math.exp(min(-x, 80.0)),
        "recip": lambda x: 1.0 / x if x != 0 else 65504.0,
        "linear": lambda x: slope * x,
    }
    return table[name]


def lut_table(g: Gen, name: str, points: list[float]) -> list[int]:
    """Table entries (fp16 bits): a function at the entry points, or random words."""
    if name == "random":
        return g.fp16_words(len(points), p_special=0.35, lo=-4.0, hi=4.0)
    fn = _func(name, g.pick((1.0, 25.0, 100.0, 0.5)))
    return [f16_sat(fn(p)) for p in points]


def _slope(g: Gen, table: list[int], points: list[float], at_end: bool) -> int:
    """An under/overflow slope scale (fp16): the table's end slope, or a typical/odd value."""
    u = g.r.random()
    i = len(points) - 2 if at_end else 0
    if u < 0.4 and points[i + 1] > points[i]:
        va, vb = f16_value(table[i]), f16_value(table[i + 1])
        if math.isfinite(va) and math.isfinite(vb):
            return f16_sat((vb - va) / (points[i + 1] - points[i]))
    if u < 0.8:
        return f16(g.pick((0.0, 1.0, 0.1, -0.1, 2.0**-10, 0.5)))
    return g.fp16_word(0.3, -4.0, 2.0)


def lut_setup(c: Case) -> tuple[float, float]:
    """Activate the LUT with realistic or random registers and tables; return X's range."""
    g = c.g
    realistic = g.bit(0.6) == 1
    le_fn = g.bit(0.55)  # 1 linear, 0 exponent
    fn_le, fn_lo = g.pick(FUNCS), g.pick(FUNCS)
    c.set(EW_BYPASS=0, EW_LUT_BYPASS=0, LUT_LE_FUNCTION=le_fn)
    c.set(LUT_HYBRID_PRIORITY=g.bit(), LUT_UFLOW_PRIORITY=g.bit(), LUT_OFLOW_PRIORITY=g.bit())
    k = g.r.randint(-2, 6)
    half = 2.0**k  # tables span [-half, half]
    if realistic:
        lo_start, lo_sel = -half, k + 1 - 8  # 256 intervals of 2^sel
        le_off = g.r.randint(-10, 3)
        le_start = -half if le_fn else g.pick((0.0, 0.0, -half))
        le_sel = k + 1 - 6
    else:
        lo_start, lo_sel = g.typical(-2, 2), g.r.randint(-12, 20)
        le_start, le_sel, le_off = g.typical(-2, 2), g.r.randint(-12, 20), g.r.randint(-30, 20)
        if g.bit(0.2):
            lo_sel, le_sel, le_off = g.r.randint(-128, 127), g.r.randint(-128, 127), g.raw(8)
    if le_fn:
        le_points = [le_start + i * 2.0**le_sel for i in range(LE_DEPTH)]
    else:
        le_off = le_off if -128 <= le_off < 128 else le_off - 256
        le_points = [le_start + 2.0 ** min(le_off + i, 127) for i in range(LE_DEPTH)]
    lo_points = [lo_start + i * 2.0**lo_sel for i in range(LO_DEPTH)]
    le_tab, lo_tab = lut_table(g, fn_le, le_points), lut_table(g, fn_lo, lo_points)
    c.lut = (le_tab, lo_tab)
    le_end = le_points[-1] if realistic else g.typical(-2, 3)
    lo_end = lo_points[-1] if realistic else g.typical(-2, 3)
    c.set(LUT_LE_START=f32(le_start), LUT_LE_END=f32(min(le_end, 3.4e38)))
    c.set(LUT_LO_START=f32(lo_start), LUT_LO_END=f32(lo_end))
    c.set(LUT_LE_INDEX_OFFSET=s8(le_off), LUT_LE_INDEX_SELECT=s8(le_sel))
    c.set(LUT_LO_INDEX_SELECT=s8(lo_sel))
    for name, tab, points in (("LE", le_tab, le_points), ("LO", lo_tab, lo_points)):
        c.set(**{f"LUT_{name}_SLOPE_UFLOW_SCALE": _slope(g, tab, points, False)})
        c.set(**{f"LUT_{name}_SLOPE_OFLOW_SCALE": _slope(g, tab, points, True)})
    le_kind = "linear" if le_fn else "exponent"
    regs = "" if realistic else " (random registers)"
    c.tags.append(f"lut: LE {le_kind} {fn_le}, LO linear {fn_lo}{regs}")
    span = max(abs(lo_start), abs(lo_points[-1]), 1.0)
    return -1.5 * span, 1.5 * span


def lut_x_data(c: Case, lo: float, hi: float) -> None:
    """X for a LUT case: mostly inside [lo, hi] (hits, under/overflow), some edge cases."""
    g = c.g
    fp16 = c.x_dtype == "float16"
    x = []
    for _ in range(c.n):
        if g.bit(0.75):
            v = (
                g.r.uniform(lo, hi)
                if g.bit(0.8)
                else g.r.uniform(lo, hi) * 2.0 ** -g.r.randint(2, 9)
            )
            x.append(f16_sat(v) if fp16 else f32(v))
        else:
            x.append(g.fp16_word(0.6) if fp16 else g.fp32_word(0.6))
    c.x = x
    c.tags.append("X fp16 from memory" if fp16 else "X fp32 from CACC")


# --- the kinds of case ---------------------------------------------------------------------------


def kind_passthrough(c: Case) -> None:
    bypass_all(c)
    if c.g.bit(0.3):  # units on, every stage inside bypassed
        for unit in ("BS", "BN"):
            c.set(**{f"{unit}_BYPASS": 0, f"{unit}_ALU_BYPASS": 1, f"{unit}_MUL_BYPASS": 1})
            c.set(**{f"{unit}_RELU_BYPASS": 1})
    fp16_x_data(c, p_special=0.4)
    c.tags.insert(0, "passthrough")


def kind_x_alu(c: Case) -> None:
    bypass_all(c)
    units = c.g.pick((("BS",), ("BN",), ("BS", "BN")))
    for unit in units:
        fp16_x_unit(c, unit, alu=True, mul=False)
    fp16_x_data(c)
    c.tags.insert(0, "x_alu")


def kind_x_mul(c: Case) -> None:
    bypass_all(c)
    units = c.g.pick((("BS",), ("BN",), ("BS", "BN")))
    for unit in units:
        fp16_x_unit(c, unit, alu=c.g.bit(0.3) == 1, mul=True)
    fp16_x_data(c, hi=5.0)
    c.tags.insert(0, "x_mul")


def kind_x_chain(c: Case) -> None:
    bypass_all(c)
    fp16_x_unit(c, "BS")
    fp16_x_unit(c, "BN")
    fp16_x_data(c)
    c.tags.insert(0, "x_chain")


def kind_ew(c: Case) -> None:
    bypass_all(c)
    alu, mul = c.g.pick(((True, True), (True, False), (False, True)))
    fp16_ew(c, alu=alu, mul=mul, algo=c.g.pick((0, 1, 2, 2)))
    fp16_x_data(c)
    c.tags.insert(0, "ew")


def kind_ew_cmp(c: Case) -> None:
    g = c.g
    bypass_all(c)
    variant = g.pick(("all", "all_reg", "most", "most", "any"))
    c.set(EW_BYPASS=0, EW_ALU_BYPASS=0, EW_ALU_ALGO=3, EW_LUT_BYPASS=1, EW_MUL_BYPASS=1)
    if variant == "any":
        fp16_ew(c, alu=True, algo=3)
        if g.bit(0.4):
            fp16_x_unit(c, g.pick(("BS", "BN")))
        fp16_x_data(c)
        c.tags.insert(0, "ew_cmp")
        return
    # Equal data: X and the EW ALU operand hold the same fp16 values.
    words = [g.fp16_word(0.4) for _ in range(c.n)]
    if c.x_dtype == "float32" or variant == "all_reg":
        # exact fp16 values as fp32 words (finite: fp16 Inf/NaN do not become the same fp32 word)
        words = [w if (w & 0x7C00) != 0x7C00 else g.fp16_word(0.0) for w in words]
    if variant == "all_reg":  # X constant, the EW ALU operand an fp32 register of that value
        words = [words[0]] * c.n
        c.set(EW_ALU_SRC=0, EW_ALU_OPERAND=f32(f16_value(words[0])))
    else:
        op = list(words)
        if variant == "most":
            for i in g.r.sample(range(c.n), g.r.randint(1, 3)):
                op[i] = g.pick((op[i] ^ 0x8000, op[i] ^ 0x0001, g.fp16_word(0.3)))
        c.set(EW_ALU_SRC=1)
        c.ops["EW_ALU"] = op
    c.x = list(words) if c.x_dtype == "float16" else [f32(f16_value(w)) for w in words]
    if g.bit(0.25):  # MUL on, multiplying by exactly 1.0
        c.set(EW_MUL_BYPASS=0, EW_MUL_SRC=0, EW_MUL_PRELU=g.bit(), EW_MUL_OPERAND=0x3F800000)
    c.tags.insert(0, f"ew_cmp ({'most' if variant == 'most' else 'all'} elements equal)")
    c.tags.append("X fp16 from memory" if c.x_dtype == "float16" else "X fp32 from CACC")


def kind_lut(c: Case, full: bool = False) -> None:
    g = c.g
    bypass_all(c)
    if full:
        for unit in ("BS", "BN"):
            if g.bit(0.6):
                fp16_x_unit(c, unit)
    fp16_ew(c, alu=g.bit(0.3 if not full else 0.5) == 1, mul=g.bit(0.35 if not full else 0.5) == 1)
    lo, hi = lut_setup(c)
    lut_x_data(c, lo, hi)
    if full:
        c.tags[0] = "full pipeline, " + c.tags[0]


def kind_out_int16(c: Case) -> None:
    g = c.g
    bypass_all(c)
    c.set(OUT_PRECISION=INT16)
    if g.bit(0.4):
        fp16_x_unit(c, g.pick(("BS", "BN")), alu=g.bit() == 1, mul=g.bit() == 1)
    g_words = []
    for _ in range(c.n):
        u = g.r.random()
        if u < 0.35:
            v = g.r.randint(-33000, 33000) + g.pick((0.5, -0.5, 0.25, 0.75, 0.0))
        elif u < 0.6:
            v = g.r.uniform(-40000.0, 40000.0)
        elif u < 0.8:
            v = g.pick((32767.5, 32768.0, -32768.5, -32769.0, 65504.0, -65520.0, 0.5, 2.5, -2.5))
        else:
            v = None
        if c.x_dtype == "float16":
            g_words.append(g.fp16_word(0.6) if v is None else f16_sat(v))
        else:
            g_words.append(g.fp32_word(0.6) if v is None else f32(v))
    c.x = g_words
    c.tags.insert(0, "out_int16")
    c.tags.append("X fp16 from memory" if c.x_dtype == "float16" else "X fp32 from CACC")


def kind_full(c: Case) -> None:
    g = c.g
    if g.bit(0.35):
        kind_lut(c, full=True)
        return
    bypass_all(c)
    for unit in ("BS", "BN"):
        if g.bit(0.7):
            fp16_x_unit(c, unit)
    if g.bit(0.75):
        fp16_ew(c)
    fp16_x_data(c)
    c.tags.insert(0, "full")


# --- integer processing with FP16 output ---------------------------------------------------------


def _int_unit(c: Case, unit: str) -> None:
    g = c.g
    c.set(**{f"{unit}_BYPASS": 0, f"{unit}_ALU_BYPASS": g.bit(0.4), f"{unit}_RELU_BYPASS": g.bit()})
    c.set(**{f"{unit}_ALU_ALGO": g.raw(2), f"{unit}_ALU_SRC": g.bit(0.4)})
    c.set(**{f"{unit}_ALU_OPERAND": g.r.randint(-3000, 3000) & 0xFFFF})
    c.set(**{f"{unit}_ALU_SHIFT_VALUE": g.r.randint(0, 10) if g.bit(0.8) else g.raw(6)})
    c.set(**{f"{unit}_MUL_BYPASS": g.bit(0.4), f"{unit}_MUL_SRC": g.bit(0.4)})
    c.set(**{f"{unit}_MUL_PRELU": g.bit(0.3), f"{unit}_MUL_OPERAND": g.raw(16)})
    c.set(**{f"{unit}_MUL_SHIFT_VALUE": g.r.randint(0, 24) if g.bit(0.8) else g.raw(8)})
    if c.attrs[f"{unit}_ALU_SRC"] and not c.attrs[f"{unit}_ALU_BYPASS"]:
        c.ops[f"{unit}_ALU"] = [g.r.randint(-32768, 32767) for _ in range(c.n)]
    if c.attrs[f"{unit}_MUL_SRC"] and not c.attrs[f"{unit}_MUL_BYPASS"]:
        c.ops[f"{unit}_MUL"] = [g.r.randint(-32768, 32767) for _ in range(c.n)]


def _int_ew(c: Case) -> None:
    g = c.g
    c.set(EW_BYPASS=0, EW_LUT_BYPASS=1, EW_ALU_BYPASS=g.bit(0.4), EW_MUL_BYPASS=g.bit(0.4))
    c.set(EW_ALU_ALGO=g.raw(2), EW_ALU_SRC=g.bit(0.4), EW_MUL_SRC=g.bit(0.4))
    c.set(EW_ALU_OPERAND=u32(g.r.randint(-70000, 70000)), EW_MUL_OPERAND=u32(g.r.randint(-9, 9)))
    c.set(EW_MUL_PRELU=g.bit(0.3), EW_TRUNCATE=g.r.randint(0, 12))
    for op in ("ALU", "MUL"):
        c.set(**{f"EW_{op}_CVT_BYPASS": g.bit(), f"EW_{op}_CVT_TRUNCATE": g.r.randint(0, 8)})
        c.set(**{f"EW_{op}_CVT_OFFSET": u32(g.r.randint(-100, 100))})
        c.set(**{f"EW_{op}_CVT_SCALE": g.r.randint(-4, 4) & 0xFFFF})
        if c.attrs[f"EW_{op}_SRC"] and not c.attrs[f"EW_{op}_BYPASS"]:
            c.ops[f"EW_{op}"] = [g.r.randint(-32768, 32767) for _ in range(c.n)]


def kind_int_fp16(c: Case) -> None:
    g = c.g
    proc = g.pick((INT8, INT16))
    c.set(PROC_PRECISION=proc, OUT_PRECISION=FP16)
    bypass_all(c)
    for unit in ("BS", "BN"):
        if g.bit(0.5):
            _int_unit(c, unit)
    if g.bit(0.3):
        _int_ew(c)
    c.set(CVT_OFFSET=u32(g.r.randint(-2048, 2048)), CVT_SHIFT=g.r.randint(0, 20))
    c.set(CVT_SCALE=1 if g.bit(0.5) else g.r.randint(-40000, 40000) & 0xFFFF)
    edges = (0, 1, -1, 2047, 2049, 2051, 4097, 4098, 4102, 32769, 65504, 65519, 65520, 65535)
    x = []
    for _ in range(c.n):
        u = g.r.random()
        if u < 0.3:
            x.append(g.pick(edges) * g.pick((1, -1)))
        elif u < 0.7:
            x.append(g.r.randint(-70000, 70000))
        else:
            x.append(int(g.r.gauss(0, 1) * 10.0 ** g.r.uniform(2, 9.3)))
    c.x_dtype = "int32"
    c.x = [max(-(2**31), min(2**31 - 1, v)) for v in x]
    c.tags.insert(
        0, f"INT{8 if proc == INT8 else 16} -> FP16 output (integer pipeline, Int17ToFp16)"
    )


KIND_FUNCS = {
    "passthrough": kind_passthrough,
    "x_alu": kind_x_alu,
    "x_mul": kind_x_mul,
    "x_chain": kind_x_chain,
    "ew": kind_ew,
    "ew_cmp": kind_ew_cmp,
    "lut": kind_lut,
    "out_int16": kind_out_int16,
    "full": kind_full,
    "int_fp16": kind_int_fp16,
}


def schedule(n_cases: int, g: Gen) -> list[str]:
    """``n_cases`` kinds in the proportions of :data:`KINDS`, shuffled."""
    total = sum(KINDS.values())
    shares = {k: n_cases * v / total for k, v in KINDS.items()}
    counts = {k: int(s) for k, s in shares.items()}
    rest = sorted(KINDS, key=lambda k: (-(shares[k] - counts[k]), list(KINDS).index(k)))
    for k in rest[: n_cases - sum(counts.values())]:
        counts[k] += 1
    kinds = [k for k in KINDS for _ in range(counts[k])]
    g.r.shuffle(kinds)
    return kinds


def make_case(g: Gen, kind: str) -> Case:
    """Draw one case of ``kind``."""
    c = Case(g)
    if kind != "int_fp16":
        c.set(PROC_PRECISION=FP16, OUT_PRECISION=INT16 if g.bit(0.25) else FP16)
        c.set(NAN_TO_ZERO=g.bit(0.3))
        c.x_dtype = "float16" if g.bit() else "float32"
    KIND_FUNCS[kind](c)
    if c.fp16_proc:
        extra = []
        if c.attrs["OUT_PRECISION"] == INT16:
            extra.append("FP16->INT16 output")
        if c.attrs["NAN_TO_ZERO"]:
            extra.append("NAN_TO_ZERO")
        c.tags[1:1] = extra
    if g.bit(0.08):  # a per-element operand that no unit uses
        name = g.pick(OPERANDS)
        if name not in c.ops:
            c.ops[name] = g.fp16_words(c.n) if c.fp16_proc else [g.raw(16) for _ in range(c.n)]
    return c


# --- JSON ----------------------------------------------------------------------------------------
