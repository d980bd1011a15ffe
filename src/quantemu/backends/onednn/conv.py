"""``conv2d``: raw s32 accumulators of oneDNN's int8 forward convolution (page §5)."""

from __future__ import annotations

import numpy as np

from quantemu.backends.onednn.im2col import (
    dense_columns,
    in_bounds,
    is_dense,
    segment_layout,
    weight_columns,
)
from quantemu.backends.onednn.matmul import MAX_REDUCTION, AccumulatorResult, to_int32
from quantemu.backends.onednn.pairsum import ArrayCache, correct_pair_sums, exact_matmul
from quantemu.backends.onednn.params import (
    INT32_MAX,
    Conv2dParams,
    ConvImpl,
    SrcType,
    check_operand,
)
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.intmath import shift_right_round_half_even

_SRC_DTYPES = {SrcType.U8: np.uint8, SrcType.S8: np.int8}


def rne_half(w: np.ndarray) -> np.ndarray:
    """``rne(w / 2)``: the weight halving of s8-source convolution on non-VNNI ISAs (§5.1).

    >>> rne_half(np.array([-128, -127, -3, -1, 1, 3, 5, 127], dtype=np.int8)).tolist()
    [-64, -64, -2, 0, 0, 2, 2, 64]
    """
    return np.asarray(shift_right_round_half_even(w.astype(np.int64), 1)).astype(np.int8)


def conv2d(x: np.ndarray, w: np.ndarray, params: Conv2dParams) -> AccumulatorResult:
    """``y (N, O, OH, OW)`` int32: the s32 accumulators oneDNN 3.12 computes (page §5.1).

    - VNNI/AMX ISA or ``impl = ref``: exact, ``Σ_T Σ_c (src − zp)·w``;
    - non-VNNI, s8 source: ``2·Σ_T Σ_c (src − zp)·rne(w/2)`` (the weights are halved with
      round-half-even when oneDNN prepares them; with ``|w/2| <= 64`` no pair can saturate);
    - non-VNNI, u8 source: ``Σ_segments pair_sum(a_seg, w_seg) − zp·Σ_T Σ_c w`` with the
      segments of ``impl`` (§5.2); out-of-bounds taps are 0 in their place in a segment.

    ``x (N, C, H, W)`` is uint8/int8 as ``src_dt`` says, ``w (O, C/groups, KH, KW)`` int8.
    """
    out_hw = _check(x, w, params)
    geometry = params.geometry
    exact = params.isa.exact or params.impl is ConvImpl.REF
    halve = not exact and params.src_dt is SrcType.S8
    pairing = not exact and not halve
    layout = segment_layout(params.impl if pairing else None, *w.shape[1:])
    weights = rne_half(w) if halve else w
    dtype = np.int8 if pairing else np.float32  # the pair-sum engine reads integers
    src_max = 255 if params.src_dt is SrcType.U8 else 128
    wcols = _weight_columns(
        weights, geometry.groups, layout, params.impl if pairing else None, dtype
    )
    saturated = 0
    # 8-bit columns: the int8 engine reads u8 in place (the float path converts them).
    cols = dense_columns(x, geometry, w.shape[2:], out_hw)
    dense_w = wcols
    if pairing:  # the exact product in dense order, then the pair corrections on top
        exact_layout = segment_layout(None, *w.shape[1:])
        dense_w = _weight_columns(weights, geometry.groups, exact_layout, None, np.float32)
    # int32 only when the int8 engine computes it: its own bound proves it exact.
    acc = exact_matmul(cols, dense_w, a_max=src_max, allow_int32=True)
    if pairing:
        slots = _dense_slots(layout, w.shape[3])
        saturated, _ = correct_pair_sums(acc, cols.swapaxes(1, 2), slots, wcols)
    n = x.shape[0]
    g, _, og = acc.shape
    acc = acc.reshape(g, n, out_hw[0] * out_hw[1], og)
    # The weights prove every accumulator (and every partial value below) inside s32: the
    # correction may then run in int32, and no range scan is needed.
    fits = _accumulator_bound(wcols, src_max, params.src_zero_point, halve) <= INT32_MAX
    if not fits and acc.dtype != np.int64:
        acc = acc.astype(np.int64)
    if params.src_zero_point:
        # Exact s32 correction -zp·Σ w over the in-bounds taps of each position (§2, §5.1).
        acc -= _zero_point_correction((x.shape[2:], out_hw), params, layout, wcols, acc)
    if halve:
        acc *= 2
    y = acc.reshape(g, n, *out_hw, og).transpose(1, 0, 4, 2, 3)
    if not fits:
        return AccumulatorResult(to_int32(y.reshape(n, g * og, *out_hw), "conv2d"), saturated)
    if y.dtype == np.int32 and y.flags.c_contiguous:
        # The engine's transposed product of one image is NCHW already: no layout pass.
        return AccumulatorResult(y.reshape(n, g * og, *out_hw), saturated)
    # One pass for the NCHW layout and the cast to int32.
    out = np.empty((n, g, og, *out_hw), dtype=np.int32)
    np.copyto(out.transpose(0, 1, 3, 4, 2), y.transpose(0, 1, 3, 4, 2), casting="unsafe")
    return AccumulatorResult(out.reshape(n, g * og, *out_hw), saturated)


def _accumulator_bound(wcols: np.ndarray, src_max: int, zp: int, halve: bool) -> int:
    """A bound on ``|acc|`` from the weights alone: ``(src_max + |zp|)·max_n Σ_k |w[k, n]|``
    (doubled for halved weights). Pair saturation only shrinks a pair sum's magnitude."""
    col = _WCOLS.get(
        wcols, "abs_colsum", lambda: int(np.abs(wcols, dtype=np.float64).sum(axis=1).max(initial=0))
    )
    return (src_max + abs(zp)) * col * (2 if halve else 1)


_WCOLS = ArrayCache()


def _dense_slots(layout, kw: int) -> np.ndarray:
    """Row of ``dense_columns``' ``(kh, kw, c)`` order for each slot of ``layout`` (row 0 for a
    padding slot, whose weight is 0), built once per layout."""
    cached = _SLOTS.get(id(layout))
    if cached is None or cached[0] is not layout:
        cg = int(layout.c.max()) + 1
        index = np.where(layout.c < 0, 0, (layout.kh * kw + layout.kw) * cg + layout.c)
        cached = _SLOTS[id(layout)] = (layout, index.astype(np.intp))
    return cached[1]


_SLOTS: dict[int, tuple] = {}


def _weight_columns(w: np.ndarray, groups: int, layout, impl: ConvImpl | None, dtype):
    """``weight_columns`` as a read-only ``dtype`` array, cached for weights that cannot change.

    A model's weights do not change between batches: their columns (and, through
    ``exact_matmul``'s cache keyed on these columns, their GEMM runs) are built once. The exact
    engines take them as float32 GEMM operands directly (integers, exact).
    """

    def make() -> np.ndarray:
        o, cg, kh, kw = w.shape
        if is_dense(layout, cg, kh, kw):  # plain (kh, kw, c) order: a transpose suffices
            cols = w.reshape(groups, o // groups, cg, kh, kw).transpose(0, 3, 4, 2, 1)
            cols = cols.reshape(groups, kh * kw * cg, o // groups)
        else:
            cols = weight_columns(w, groups, layout)
        cols = np.array(cols, dtype=dtype, order="C")
        cols.setflags(write=False)
        return cols

    return _WCOLS.get(w, (groups, impl, np.dtype(dtype).name), make)


def _zero_point_correction(shapes, params: Conv2dParams, layout, wcols, acc) -> np.ndarray:
    """``(G, 1, OH·OW, O/G)`` ``zp·Σ w`` over the in-bounds taps, as ``acc``'s dtype and in its
    memory order (channel-major after the engine's transposed product): it depends on the
    weights and the shapes ``(H, W), (OH, OW)`` alone, so it is built once per weight matrix
    and input size."""
    hw, out_hw = shapes
    channel_major = acc.strides[-1] != acc.itemsize

    def make() -> np.ndarray:
        sums = _in_bounds_weight_sums(hw, params.geometry, layout, out_hw, wcols)
        corr = (params.src_zero_point * sums[:, None]).astype(acc.dtype)
        if channel_major:
            corr = np.ascontiguousarray(corr.swapaxes(-1, -2)).swapaxes(-1, -2)
        corr.setflags(write=False)
        return corr

    key = (
        "zp_correction",
        tuple(hw),
        params.geometry,
        params.src_zero_point,
        acc.dtype.str,
        channel_major,
    )
    return _WCOLS.get(wcols, key, make)


def _in_bounds_weight_sums(hw, geometry, layout, out_hw, wcols) -> np.ndarray:
    """``(G, OH·OW, O/G)``: the sum of the weights of the in-bounds taps of every position.

    Interior positions read every tap and share the total; only the border rows of the in-bounds
    mask need a product (|Σ w| <= 128 · L: exact).
    """
    mask = in_bounds(hw, geometry, layout, out_hw)
    full = mask.sum(axis=1) == np.count_nonzero(layout.c >= 0)
    sums = np.empty((wcols.shape[0], mask.shape[0], wcols.shape[2]), dtype=np.int64)
    sums[:, full] = wcols.sum(axis=1, dtype=np.int64)[:, None]
    if not full.all():
        sums[:, ~full] = exact_matmul(mask[~full][None], wcols)
    return sums


def _check(x: np.ndarray, w: np.ndarray, params: Conv2dParams) -> tuple[int, int]:
    """Validate the operands; return ``(OH, OW)``."""
    for_src = f" for src_dt = {params.src_dt.value!r}"
    check_operand(x, "conv2d: x", _SRC_DTYPES[params.src_dt], 4, "(N, C, H, W)", note=for_src)
    check_operand(w, "conv2d: w", np.int8, 4, "(O, C/groups, KH, KW)")
    check_conv_shapes("conv2d", x.shape, w.shape, params.geometry.groups)
    out_hw = params.geometry.output_size(x.shape[2], x.shape[3], w.shape[2], w.shape[3])
    _check_defects(params, w.shape, out_hw)
    return out_hw


def check_conv_shapes(where: str, x_shape: tuple, w_shape: tuple, groups: int) -> None:
    """Channel counts consistent with ``groups``; reduction short enough for the int64 proof."""
    c, o, cg = x_shape[1], w_shape[0], w_shape[1]
    if c % groups or o % groups or c // groups != cg:
        raise InvalidInputError(
            f"{where}: x has C = {c} channels and w is {w_shape} (O, C/groups, KH, KW) with "
            f"groups = {groups}: C and O must be multiples of groups and w.shape[1] = C/groups"
        )
    if cg == 0 or w_shape[2] == 0 or w_shape[3] == 0:
        raise InvalidInputError(f"{where}: empty kernel {w_shape}")
    if cg * w_shape[2] * w_shape[3] > MAX_REDUCTION:
        raise InvalidInputError(
            f"{where}: reduction C/groups*KH*KW = {cg * w_shape[2] * w_shape[3]} > "
            f"{MAX_REDUCTION} is not supported"
        )


def _check_defects(params: Conv2dParams, w_shape: tuple, out_hw: tuple[int, int]) -> None:
    """Refuse the kernel-relocation shapes oneDNN 3.12 computes wrongly (page §5.4)."""
    if params.impl not in (ConvImpl.RELO_W, ConvImpl.RELO_WH):
        return
    geometry = params.geometry
    _, left, _, right = geometry.pads
    if w_shape[1] == 1 and w_shape[3] > 1 and out_hw[1] == 1 and geometry.strides[1] > 1:
        raise UnsupportedError(
            f"conv2d impl = {params.impl.value!r} with C/groups = 1, KW = {w_shape[3]} > 1, "
            f"OW = 1 and stride_w = {geometry.strides[1]} > 1: oneDNN 3.12's relocated "
            "brg_conv_fwd gives wrong rows for this shape (page §5.4); not emulated"
        )
    if params.impl is ConvImpl.RELO_WH and params.src_dt is SrcType.S8 and (left or right):
        raise UnsupportedError(
            f"conv2d impl = 'relo_wh' with an s8 source and left/right padding ({left}, "
            f"{right}): oneDNN 3.12 compensates padded taps wrongly (page §5.4); not emulated"
        )
