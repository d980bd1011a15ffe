"""The CDP (local response normalisation) integer pipeline, ``conformance/nvdla.md`` §3.

Per pixel and channel: input converter, square sum over a window of 3/5/7/9 channels, the CDP
LUT, a multiply by the centre value and the output converter. :func:`cdp_window` is the datapath
on channel vectors that already carry their 4-channel halo on each side (one conformance case);
:func:`cdp` runs a whole cube, filling the channels beyond the edges the way the cmod's
sequencer does (§7). The window sum is a difference of prefix sums along the channel axis:
vectorised over every pixel and channel.
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.nvdla.fp16.cdp import cdp_fp16, cdp_window_fp16
from quantemu.backends.nvdla.halo import HALO, halo_outputs, with_halo
from quantemu.backends.nvdla.lut import cdp_counts, cdp_lut, check_tables
from quantemu.backends.nvdla.precision import converter, shr
from quantemu.backends.nvdla.registers import CdpRegisters, Precision
from quantemu.backends.nvdla.results import CdpResult
from quantemu.errors import InvalidInputError


def _check_input(x, regs: CdpRegisters, func: str) -> np.ndarray:
    a = np.asarray(x)
    bits = 8 if regs.input_type is Precision.INT8 else 16
    if a.dtype.kind not in "iu":
        raise InvalidInputError(f"{func}: X must be an integer array, got dtype {a.dtype}")
    a = a.astype(np.int64)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if a.size and (a.min() < lo or a.max() > hi):
        raise InvalidInputError(
            f"{func}: INPUT_DATA_TYPE = {regs.input_type.name} but X holds values in "
            f"[{a.min()}, {a.max()}], outside [{lo}, {hi}]"
        )
    return a


def cdp_window(x, regs: CdpRegisters, lut_le, lut_lo, *, axis: int = -1) -> CdpResult:
    """The CDP datapath (§3.2) on channel vectors carrying a 4-channel halo on each side.

    ``x`` has ``C + 8`` channels along ``axis``; output channel ``i`` is centred on input channel
    ``i + 4``, so the result has ``C`` channels there. Any other axes are independent pixels.
    ``INPUT_DATA_TYPE = FP16`` runs :func:`.fp16.cdp.cdp_window_fp16` (fp16 data and tables).
    """
    if regs.input_type is Precision.FP16:
        return cdp_window_fp16(x, regs, lut_le, lut_lo, axis=axis)
    xa = np.moveaxis(_check_input(x, regs, "cdp"), axis, -1)
    n_out = halo_outputs(xa, axis, np.shape(x))
    le, lo = check_tables(lut_le, lut_lo, "cdp")
    int8 = regs.input_type is Precision.INT8
    ci = regs.input_converter()
    # (int16 - int16) * int16 <= 2^32: int64 exact; 9 (INT8) or 17 (INT16) bits out.
    c = shr((xa - ci.offset) * ci.scale, ci.shift, 9 if int8 else 17)
    h = regs.half_window
    centre = c[..., HALO : HALO + n_out]
    if regs.SQSUM_BYPASS:
        ss = centre
    else:
        # Window sums as prefix-sum differences: c^2 <= 2^32, so any prefix < 2^45 for C < 8192.
        p = np.concatenate([np.zeros((*c.shape[:-1], 1), np.int64), np.cumsum(c * c, -1)], -1)
        ss = p[..., HALO + h + 1 : HALO + h + 1 + n_out] - p[..., HALO - h : HALO - h + n_out]
    out = cdp_lut(ss, le, lo, regs.lut())
    v = out.y if regs.MUL_BYPASS else out.y * centre  # int16 * 17 bits: < 2^33
    co = regs.output_converter()
    # (33-bit - 32-bit) * int16 < 2^50; ±1-rule flag at the output width.
    y, flag = converter(v, offset=co.offset, scale=co.scale, shift=co.shift, bits=8 if int8 else 16)
    return CdpResult(
        y=np.moveaxis(np.asarray(y, dtype=np.int8 if int8 else np.int16), -1, axis),
        OUT_SATURATION=int(np.count_nonzero(flag)),
        **cdp_counts(out.le_kind, out.lo_kind),
    )


def edge_fill(regs: CdpRegisters) -> int:
    """The value the cmod's sequencer puts in channels beyond a cube's edges (§7).

    It fills bytes with the low byte of ``DATIN_OFFSET``: INT8 reads that byte (the converted
    value is then 0); INT16 reads the 16-bit word made of two such bytes.

    >>> edge_fill(CdpRegisters(DATIN_OFFSET=0x0305)), edge_fill(CdpRegisters(DATIN_OFFSET=0x0380))
    (5, -128)
    >>> edge_fill(CdpRegisters(INPUT_DATA_TYPE=1, DATIN_OFFSET=0x0305))
    1285
    """
    if regs.input_type is Precision.FP16:
        return 0  # +0: the cmod forces the offset to 0 in FP16
    b = regs.DATIN_OFFSET & 0xFF
    if regs.input_type is Precision.INT8:
        return b - 256 if b >= 128 else b
    word = b << 8 | b
    return word - 65536 if word >= 32768 else word


def cdp(x, regs: CdpRegisters, lut_le, lut_lo, *, axis: int = 0) -> CdpResult:
    """LRN over a cube (channels along ``axis``, default ``[C, H, W]``), edges filled as the cmod.

    Channels beyond ``[0, C)`` hold :func:`edge_fill`; this fill is read from the cmod and is
    not covered by the conformance vectors (§7). Counters count the real channels only (the
    hardware also processes the padding lanes of its last atom, §7). FP16 runs
    :func:`.fp16.cdp.cdp_fp16` (edges +0).
    """
    if regs.input_type is Precision.FP16:
        return cdp_fp16(x, regs, lut_le, lut_lo, axis=axis)
    xa = np.moveaxis(_check_input(x, regs, "cdp"), axis, -1)
    r = cdp_window(with_halo(xa, edge_fill(regs)), regs, lut_le, lut_lo)
    return CdpResult(np.moveaxis(r.y, -1, axis), **r.counters())
