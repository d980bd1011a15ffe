"""Naive scalar reference of the nvdla ops, written straight from the conformance page.

This is the page's pseudo-code (``conformance/nvdla.md`` §1.2, §2-§5) transcribed on plain,
unbounded Python ints, one element at a time, reading the raw register fields itself. It shares
no code with the backend (not even intmath), so a test that compares the two compares two
independent readings of the page. Deliberately slow and literal: do not optimise it.
"""

from __future__ import annotations

UFLOW, OFLOW, HIT = "UFLOW", "OFLOW", "HIT"


# --- §1.2 notation ------------------------------------------------------------------------------


def wrap(v: int, b: int) -> int:
    return ((v + 2 ** (b - 1)) % 2**b) - 2 ** (b - 1)


def sx(f: int, b: int) -> int:
    return wrap(f, b)


def sat(v: int, b: int) -> int:
    return min(max(v, -(2 ** (b - 1))), 2 ** (b - 1) - 1)


def rhaz(v: int, s: int) -> int:
    if s == 0:
        return v
    sign = -1 if v < 0 else 1
    return sign * ((abs(v) + 2 ** (s - 1)) >> s)


def shr(v: int, s: int, b: int) -> int:
    return sat(rhaz(v, s), b)


def sshr(v: int, s: int, b: int) -> int:
    return shr(v, s, b) if s >= 0 else sat(v << -s, b)


def shr_flag(v: int, s: int, b: int) -> tuple[int, bool]:
    o = shr(v, s, b)
    i = v >> s
    return o, not (o - 1 <= i <= o + 1)


# --- §2 sdp ---------------------------------------------------------------------------------------


def x_unit(x: int, alu_mem: int, mul_mem: int, a_: dict, u: str) -> int:
    def f(name):
        return a_[f"{u}_{name}"]

    if f("BYPASS"):
        return x
    a = x
    if not f("ALU_BYPASS"):
        op = sx(alu_mem if f("ALU_SRC") else f("ALU_OPERAND"), 16)
        op = sat(op << f("ALU_SHIFT_VALUE"), 32)
        algo = f("ALU_ALGO")
        a = max(x, op) if algo == 0 else min(x, op) if algo == 1 else x + op
    m, keep = a, False
    if not f("MUL_BYPASS"):
        k = sx(mul_mem if f("MUL_SRC") else f("MUL_OPERAND"), 16)
        if f("MUL_PRELU") and a >= 0:
            keep = True
        else:
            m = a * k
    t = wrap(m, 32) if keep else shr(m, f("MUL_SHIFT_VALUE") % 64, 32)
    if not f("RELU_BYPASS"):
        t = max(t, 0)
    return t


def ew_cvt(v: int, a_: dict, which: str) -> int:
    if a_[f"EW_{which}_CVT_BYPASS"]:
        return v
    off = sx(a_[f"EW_{which}_CVT_OFFSET"], 32)
    scale = sx(a_[f"EW_{which}_CVT_SCALE"], 16)
    return shr((v - off) * scale, a_[f"EW_{which}_CVT_TRUNCATE"], 32)


def y_unit(x: int, alu_mem: int, mul_mem: int, a_: dict, tables: tuple) -> tuple:
    m = x
    if not a_["EW_MUL_BYPASS"]:
        k = ew_cvt(mul_mem, a_, "MUL") if a_["EW_MUL_SRC"] else sx(a_["EW_MUL_OPERAND"], 32)
        m = x if (a_["EW_MUL_PRELU"] and x >= 0) else shr(x * k, a_["EW_TRUNCATE"], 32)
    a = m
    if not a_["EW_ALU_BYPASS"]:
        k = ew_cvt(alu_mem, a_, "ALU") if a_["EW_ALU_SRC"] else sx(a_["EW_ALU_OPERAND"], 32)
        algo = a_["EW_ALU_ALGO"]
        r = {0: max(m, k), 1: min(m, k), 2: m + k, 3: 0 if m == k else 1}[algo]
        a = sat(r, 32)
    if a_["EW_LUT_BYPASS"]:
        return a, None
    return sdp_lut(a, a_, *tables)


def sdp_index_linear(x: int, start: int, sel: int, depth: int, is_le: bool):
    if x <= start:
        return (UFLOW,)
    u = x - start
    q = u >> sel if sel >= 0 else u << -sel
    if q >= depth - 1:
        return (OFLOW,)
    d = u % 2**sel if 0 <= sel < 64 else u
    if is_le:
        d = wrap(d, 32) % 2**35
    frac = d >> (sel - 35) if sel >= 35 else (d << (35 - sel)) % 2**35
    return (HIT, q, frac)


def sdp_index_exponent(x: int, start: int, off: int):
    if x <= start:
        return (UFLOW,)
    s = x - start
    e = s.bit_length() - 1
    if e < off:
        return (UFLOW,)
    if e - off >= 64:
        return (OFLOW,)
    return (HIT, e - off, (s - 2**e) << (35 - e))


def _pick(le_kind: str, lo_kind: str, a_: dict) -> str:
    if le_kind == UFLOW and lo_kind == UFLOW:
        return "LO" if a_["LUT_UFLOW_PRIORITY"] else "LE"
    if le_kind == OFLOW and lo_kind == OFLOW:
        return "LO" if a_["LUT_OFLOW_PRIORITY"] else "LE"
    if le_kind == HIT and lo_kind == HIT:
        return "LO" if a_["LUT_HYBRID_PRIORITY"] else "LE"
    if le_kind == HIT:
        return "LE"
    if lo_kind == HIT:
        return "LO"
    return "LO" if a_["LUT_HYBRID_PRIORITY"] else "LE"


def sdp_lut(x: int, a_: dict, le_t: list, lo_t: list) -> tuple[int, tuple]:
    off = sx(a_["LUT_LE_INDEX_OFFSET"], 8)
    exp_mode = a_["LUT_LE_FUNCTION"] == 0
    if exp_mode:
        le = sdp_index_exponent(x, sx(a_["LUT_LE_START"], 32), off)
    else:
        le = sdp_index_linear(
            x, sx(a_["LUT_LE_START"], 32), sx(a_["LUT_LE_INDEX_SELECT"], 8), 65, True
        )
    lo = sdp_index_linear(
        x, sx(a_["LUT_LO_START"], 32), sx(a_["LUT_LO_INDEX_SELECT"], 8), 257, False
    )
    pick = _pick(le[0], lo[0], a_)
    t, r = (le_t, le) if pick == "LE" else (lo_t, lo)
    stats = (r[0], le[0] == HIT, lo[0] == HIT)
    if r[0] == HIT:
        q, frac = r[1], r[2]
        return shr(t[q] * (2**35 - frac) + t[q + 1] * frac, 35, 32), stats
    if r[0] == UFLOW:
        y0, ref, kind = t[0], sx(a_[f"LUT_{pick}_START"], 32), "UFLOW"
    else:
        y0, ref, kind = t[-1], sx(a_[f"LUT_{pick}_END"], 32), "OFLOW"
    bias = 2**off if (pick == "LE" and exp_mode and r[0] == UFLOW and off > 0) else 0
    scale = sx(a_[f"LUT_{pick}_SLOPE_{kind}_SCALE"], 16)
    shift = sx(a_[f"LUT_{pick}_SLOPE_{kind}_SHIFT"], 5)
    v = (x - (ref + bias)) * scale
    ss = rhaz(v, shift) if shift >= 0 else v << -shift
    return sat(y0 + ss, 32), stats


def c_unit(v: int, a_: dict) -> tuple[int, bool]:
    t, flag = shr_flag(
        (v - sx(a_["CVT_OFFSET"], 32)) * sx(a_["CVT_SCALE"], 16), a_["CVT_SHIFT"], 17
    )
    return sat(t, 8 if a_["OUT_PRECISION"] == 0 else 16), flag


def sdp(a_: dict, inputs: dict) -> dict:
    """The whole op of §2.6; ``inputs`` holds lists of ints (absent operands are zeros)."""
    x = inputs["X"]
    n = len(x)

    def mem(name):
        return inputs.get(name) or [0] * n

    le, lo = inputs.get("LUT_LE"), inputs.get("LUT_LO")
    compare = a_["EW_BYPASS"] == 0 and a_["EW_ALU_BYPASS"] == 0 and a_["EW_ALU_ALGO"] == 3
    out = {"OUT_SATURATION": 0, "LUT_UFLOW": 0, "LUT_OFLOW": 0, "LUT_HYBRID": 0}
    out |= {"LUT_LE_HIT": 0, "LUT_LO_HIT": 0}
    y = []
    for i in range(n):
        v = x_unit(x[i], mem("BS_ALU")[i], mem("BS_MUL")[i], a_, "BS")
        v = x_unit(v, mem("BN_ALU")[i], mem("BN_MUL")[i], a_, "BN")
        if not a_["EW_BYPASS"]:
            v, stats = y_unit(v, mem("EW_ALU")[i], mem("EW_MUL")[i], a_, (le, lo))
            if stats is not None:
                kind, le_hit, lo_hit = stats
                key = {UFLOW: "LUT_UFLOW", OFLOW: "LUT_OFLOW", HIT: "LUT_HYBRID"}[kind]
                out[key] += 1
                out["LUT_LE_HIT"] += le_hit
                out["LUT_LO_HIT"] += lo_hit
        yi, flag = c_unit(v, a_)
        out["OUT_SATURATION"] += flag
        y.append(wrap(v, 16) if compare else yi)
    out["STATUS_UNEQUAL"] = int(compare and any(v != 0 for v in y))
    out["Y"] = y
    return out


# --- §3 cdp ---------------------------------------------------------------------------------------


def cdp_select(raw: int, int8: bool) -> int:
    b = 5 if int8 else 6
    if raw >> b & 1:
        return raw % 2 ** (b + 1) - 2 ** (b + 1)
    return raw


def _rs(v: int, s: int) -> int:
    return rhaz(v, s) if s >= 0 else v << -s


def _f16(f: int, n: int) -> int:
    return f >> (n - 16) if n > 16 else f << (16 - n)


def _flow(y0: int, d: int, scale: int, shift: int) -> int:
    return sat(y0 + _rs(d * sx(scale, 16), sx(shift, 5)), 16)


def _interp(y0: int, y1: int, f16: int) -> int:
    return sat(y0 + rhaz((y1 - y0) * f16, 16), 16)


def _s38(a_: dict, name: str) -> int:
    return sx(a_[f"{name}_HIGH"] << 32 | a_[f"{name}_LOW"], 38)


def cdp_linear(ss: int, a_: dict, tab: str, t_: list, fb: int):
    start, end = _s38(a_, f"LUT_{tab}_START"), _s38(a_, f"LUT_{tab}_END")

    def slope(kind):
        p = f"LUT_{tab}_SLOPE_{kind}"
        return a_[p + "_SCALE"], a_[p + "_SHIFT"]

    t = ss - start
    idx = t >> fb if fb >= 0 else t << -fb
    if t <= 0:
        return UFLOW, _flow(t_[0], t, *slope("UFLOW"))
    if idx >= len(t_) - 1:
        return OFLOW, _flow(t_[-1], ss - end, *slope("OFLOW"))
    f16 = 0 if fb < 0 else _f16(t % 2**fb, fb)
    return HIT, _interp(t_[idx], t_[idx + 1], f16)


def cdp_exponent(ss: int, a_: dict, t_: list):
    off = sx(a_["LUT_LE_INDEX_OFFSET"], 8)
    t = ss - _s38(a_, "LUT_LE_START")
    e = t.bit_length() - 1 if t > 0 else 0
    if t <= 0 or e < off:
        d = t - (2**off if off >= 0 else 0)
        return UFLOW, _flow(
            t_[0], d, a_["LUT_LE_SLOPE_UFLOW_SCALE"], a_["LUT_LE_SLOPE_UFLOW_SHIFT"]
        )
    if e - off >= 64:
        d = ss - _s38(a_, "LUT_LE_END")
        return OFLOW, _flow(
            t_[64], d, a_["LUT_LE_SLOPE_OFLOW_SCALE"], a_["LUT_LE_SLOPE_OFLOW_SHIFT"]
        )
    return HIT, _interp(t_[e - off], t_[e - off + 1], _f16(t - 2**e, e))


def cdp_lut(ss: int, a_: dict, le_t: list, lo_t: list, int8: bool) -> tuple[int, str]:
    if a_["LUT_LE_FUNCTION"] == 0:
        le = cdp_exponent(ss, a_, le_t)
    else:
        le = cdp_linear(ss, a_, "LE", le_t, cdp_select(a_["LUT_LE_INDEX_SELECT"], int8))
    lo = cdp_linear(ss, a_, "LO", lo_t, cdp_select(a_["LUT_LO_INDEX_SELECT"], int8))
    kinds = (le[0], lo[0])
    if kinds == (UFLOW, UFLOW):
        pick, counter = a_["LUT_UFLOW_PRIORITY"], "PERF_LUT_UFLOW"
    elif kinds == (OFLOW, OFLOW):
        pick, counter = a_["LUT_OFLOW_PRIORITY"], "PERF_LUT_OFLOW"
    elif kinds.count(HIT) == 1:
        pick = 0 if le[0] == HIT else 1
        counter = "PERF_LUT_LE_HIT" if pick == 0 else "PERF_LUT_LO_HIT"
    else:
        pick, counter = a_["LUT_HYBRID_PRIORITY"], "PERF_LUT_HYBRID"
    return (lo if pick else le)[1], counter


def cdp(a_: dict, inputs: dict) -> dict:
    """§3.2 on the ``C + 8`` halo vector ``inputs["X"]``."""
    x, le_t, lo_t = inputs["X"], inputs["LUT_LE"], inputs["LUT_LO"]
    int8 = a_["INPUT_DATA_TYPE"] == 0
    if int8:
        c = [
            shr(
                (v - sx(a_["DATIN_OFFSET"] & 0xFF, 8)) * sx(a_["DATIN_SCALE"], 16),
                a_["DATIN_SHIFTER"],
                9,
            )
            for v in x
        ]
    else:
        c = [
            shr(
                (v - sx(a_["DATIN_OFFSET"], 16)) * sx(a_["DATIN_SCALE"], 16),
                a_["DATIN_SHIFTER"],
                17,
            )
            for v in x
        ]
    out = dict.fromkeys(
        [
            "OUT_SATURATION",
            "PERF_LUT_UFLOW",
            "PERF_LUT_OFLOW",
            "PERF_LUT_HYBRID",
            "PERF_LUT_LE_HIT",
            "PERF_LUT_LO_HIT",
        ],
        0,
    )
    y = []
    for i in range(len(x) - 8):
        k, h = i + 4, a_["NORMALZ_LEN"] + 1
        ss = c[k] if a_["SQSUM_BYPASS"] else sum(c[j] ** 2 for j in range(k - h, k + h + 1))
        yl, counter = cdp_lut(ss, a_, le_t, lo_t, int8)
        out[counter] += 1
        v = yl if a_["MUL_BYPASS"] else yl * c[k]
        if int8:
            o = (v - sx(a_["DATOUT_OFFSET"] & 0x1FFFFFF, 25)) * sx(a_["DATOUT_SCALE"], 16)
            yi, flag = shr_flag(o, a_["DATOUT_SHIFTER"], 8)
        else:
            o = (v - sx(a_["DATOUT_OFFSET"], 32)) * sx(a_["DATOUT_SCALE"], 16)
            yi, flag = shr_flag(o, a_["DATOUT_SHIFTER"], 16)
        out["OUT_SATURATION"] += flag
        y.append(yi)
    out["Y"] = y
    return out


# --- §4 pdp ---------------------------------------------------------------------------------------

_SIGN_BITS = {True: (7, 8, 9, 9, 10, 10, 10), False: (15, 16, 17, 17, 18, 18, 18)}


def pdp_pad(a_: dict, n: int) -> int:
    int8 = a_["INPUT_DATA"] == 0
    raw = a_[f"PAD_VALUE_{n}X"]
    b = _SIGN_BITS[int8][n - 1]
    v = raw | ~(2 ** (b + 1) - 1) if raw >> b & 1 else raw
    return wrap(v, 16 if int8 else 32)


def pdp(a_: dict, x: list) -> list:
    """§4.2; ``x`` is a nested list ``[C][H][W]``; returns ``[C][OH][OW]``."""
    int8 = a_["INPUT_DATA"] == 0
    kw, kh = a_["KERNEL_WIDTH"] + 1, a_["KERNEL_HEIGHT"] + 1
    sw, sh = a_["KERNEL_STRIDE_WIDTH"] + 1, a_["KERNEL_STRIDE_HEIGHT"] + 1
    h, w = len(x[0]), len(x[0][0])
    oh, ow = a_["CUBE_OUT_HEIGHT"] + 1, a_["CUBE_OUT_WIDTH"] + 1
    method = a_["POOLING_METHOD"]
    out = []
    for ch in x:
        plane = []
        for oy in range(oh):
            row = []
            for ox in range(ow):
                r0, q0 = oy * sh - a_["PAD_TOP"], ox * sw - a_["PAD_LEFT"]
                rows = [r for r in range(r0, r0 + kh) if 0 <= r < h]
                cols = [q for q in range(q0, q0 + kw) if 0 <= q < w]
                vals = [ch[r][q] for r in rows for q in cols]
                if method == 1:
                    row.append(max(vals))
                    continue
                if method == 2:
                    row.append(min(vals))
                    continue
                s = sum(vals)
                nc, nr = kw - len(cols), kh - len(rows)
                if nc > 0:
                    s += len(rows) * pdp_pad(a_, nc)
                if nr > 0:
                    s += kw * pdp_pad(a_, nr)
                s = wrap(s, 16 if int8 else 32)
                t = rhaz(s * a_["RECIP_KERNEL_WIDTH"], 16)
                t = rhaz(t * a_["RECIP_KERNEL_HEIGHT"], 16)
                row.append(wrap(t, 8 if int8 else 16))
            plane.append(row)
        out.append(plane)
    return out


# --- §5 cacc --------------------------------------------------------------------------------------


def cacc(a_: dict, p: list) -> tuple[list, int]:
    """§5; ``p`` is ``[K][N]``; returns ``(Y, SAT_COUNT)``."""
    y, count = [], 0
    for i in range(len(p[0])):
        acc = p[0][i]
        for k in range(1, len(p)):
            acc = min(max(acc + p[k][i], -(2**47)), 2**47 - 1)
        q = rhaz(acc, a_["CLIP_TRUNCATE"])
        y.append(sat(q, 32))
        count += q != y[-1]
    return y, count
