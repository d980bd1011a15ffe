"""The Bias-Scale-Offset (BSO) tensor: packing per-channel fields and decoding them back.

Layout (``xs3.md`` section 3, lib_nn Note 5): an int16 tensor of shape ``(ceil(C/16), 7, 16)``;
output channel ``k`` owns column ``k % 16`` of group ``k // 16``. Rows:

====  ============  =====================================================
row   field         how the int16 word ``w`` is read
====  ============  =====================================================
0     bias_hi       signed
1     bias_lo       unsigned, ``w & 0xFFFF`` (stored as its int16 bit pattern)
2     shift1        unsigned, ``w & 0xFFFF``; 0..31 in the contract
3     scale         signed
4     offset_scale  signed
5     offset        signed
6     shift2        unsigned, ``w & 0xFFFF``; 0..31 in the contract
====  ============  =====================================================

``bias = bias_hi * 65536 + (bias_lo & 0xFFFF)`` covers all of int32. Slots of channels
``>= C`` in the last group are ignored on decoding and written as zeros on packing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.errors import InvalidInputError

GROUP = 16  # output channels per group (VPU_INT8_ACC_PERIOD)
ROWS = ("bias_hi", "bias_lo", "shift1", "scale", "offset_scale", "offset", "shift2")
MAX_SHIFT = 31  # shift words above 31 are C undefined behaviour on the x86 reference

_RANGES = {
    "bias": (-(2**31), 2**31 - 1),
    "shift1": (0, MAX_SHIFT),
    "scale": (-(2**15), 2**15 - 1),
    "offset_scale": (-(2**15), 2**15 - 1),
    "offset": (-(2**15), 2**15 - 1),
    "shift2": (0, MAX_SHIFT),
}


@dataclass(frozen=True, eq=False)
class BsoChannels:
    """The decoded per-channel output parameters, each an int64 array of shape ``(C,)``."""

    bias: np.ndarray
    shift1: np.ndarray
    scale: np.ndarray
    offset_scale: np.ndarray
    offset: np.ndarray
    shift2: np.ndarray

    @property
    def channels(self) -> int:
        """The number of output channels C."""
        return int(self.bias.shape[0])

    def fields(self) -> dict[str, np.ndarray]:
        """The six fields by name, in BSO order."""
        return {name: getattr(self, name) for name in _RANGES}


def n_groups(channels: int) -> int:
    """``ceil(channels / 16)``, the number of BSO groups."""
    return -(-channels // GROUP)


def _field(value, name: str, channels: int) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu" and not (arr.dtype == object and arr.size == 0):
        raise InvalidInputError(
            f"pack_bso: {name} must be integers, got dtype {arr.dtype}; "
            "round explicitly (e.g. xs3.quantize.derive_bso) before packing"
        )
    arr = np.broadcast_to(arr, (channels,)) if arr.ndim == 0 else arr
    if arr.shape != (channels,):
        raise InvalidInputError(
            f"pack_bso: {name} has shape {arr.shape}, expected ({channels},) like bias"
        )
    low, high = _RANGES[name]
    bad = np.flatnonzero((arr < low) | (arr > high))
    if bad.size:
        k = int(bad[0])
        raise InvalidInputError(
            f"pack_bso: {name}[{k}] = {int(arr[k])} is outside [{low}, {high}] "
            f"({bad.size} channel(s) out of range)"
        )
    return arr.astype(np.int64)


def pack_bso(bias, *, shift1, scale, offset_scale, offset, shift2) -> np.ndarray:
    """Pack per-channel output parameters into the ``(ceil(C/16), 7, 16)`` int16 BSO tensor.

    ``bias`` (int32 range) sets C; the other fields (keyword-only, so they cannot be swapped)
    are per-channel arrays of the same length or scalars. ``bias_lo`` is stored as the int16
    bit pattern of the unsigned low half. Tail slots are zero.

    >>> bso = pack_bso([-1, 65537], shift1=3, scale=16384, offset_scale=0, offset=0, shift2=20)
    >>> bso.shape, bso.dtype
    ((1, 7, 16), dtype('int16'))
    >>> bso[0, :, :2].tolist()
    [[-1, 1], [-1, 1], [3, 3], [16384, 16384], [0, 0], [0, 0], [20, 20]]
    """
    b = np.asarray(bias)
    if b.ndim != 1 or b.shape[0] < 1:
        raise InvalidInputError(
            f"pack_bso: bias must be a 1-D array of at least one channel, got shape {b.shape}"
        )
    c = b.shape[0]
    values = dict(zip(_RANGES, (bias, shift1, scale, offset_scale, offset, shift2), strict=True))
    f = {name: _field(v, name, c) for name, v in values.items()}
    # Floor division and masking on exact int64 split the int32 bias into a signed high half
    # in [-32768, 32767] and an unsigned low half in [0, 65535].
    words = np.stack(
        [
            f["bias"] >> 16,
            f["bias"] & 0xFFFF,
            f["shift1"],
            f["scale"],
            f["offset_scale"],
            f["offset"],
            f["shift2"],
        ]
    )  # (7, C)
    g = n_groups(c)
    padded = np.zeros((7, g * GROUP), dtype=np.int64)
    padded[:, :c] = words
    # The unsigned low half goes in as its int16 bit pattern (values >= 32768 become negative).
    as16 = padded.astype(np.uint16).view(np.int16)
    return np.ascontiguousarray(as16.reshape(7, g, GROUP).transpose(1, 0, 2))


def check_bso(bso, channels: int, *, op: str) -> np.ndarray:
    """Validate dtype and shape of a BSO tensor for ``channels`` outputs; return it."""
    if not isinstance(bso, np.ndarray) or bso.dtype != np.int16:
        got = bso.dtype if isinstance(bso, np.ndarray) else type(bso).__name__
        raise InvalidInputError(
            f"{op}: BSO must be an int16 array, got {got}; build it with xs3.pack_bso"
        )
    expected = (n_groups(channels), 7, GROUP)
    if bso.shape != expected:
        raise InvalidInputError(
            f"{op}: BSO has shape {bso.shape}, expected (ceil(C_out/16), 7, 16) = {expected} "
            f"for C_out = {channels}"
        )
    return bso


def check_shift(shift: np.ndarray, name: str, op: str) -> None:
    """Shifts (already read as unsigned) must lie in 0..31: others are C UB on the host."""
    bad = np.flatnonzero(shift > MAX_SHIFT)
    if bad.size:
        k = int(bad[0])
        raise InvalidInputError(
            f"{op}: {name} of channel {k} = {int(shift[k])} (the 16-bit word read as unsigned) "
            f"is outside 0..{MAX_SHIFT}; such shifts are C undefined behaviour in lib_nn's x86 "
            "reference and outside the xs3 contract; use a shift in 0..31"
        )


def unpack_bso(bso: np.ndarray, channels: int, *, op: str = "unpack_bso") -> BsoChannels:
    """Decode the first ``channels`` channels of a BSO tensor (tail slots are ignored).

    Shift words are read unsigned (``w & 0xFFFF``) and must lie in 0..31.

    >>> fields = dict(shift1=0, scale=-32768, offset_scale=1, offset=-1, shift2=31)
    >>> ch = unpack_bso(pack_bso([-2**31, 2**31 - 1], **fields), 2)
    >>> ch.bias.tolist(), ch.scale.tolist(), ch.shift2.tolist()
    ([-2147483648, 2147483647], [-32768, -32768], [31, 31])
    """
    check_bso(bso, channels, op=op)
    # (G, 7, 16) -> (7, G*16) -> first C channels; int64 holds every field exactly.
    words = bso.transpose(1, 0, 2).reshape(7, -1)[:, :channels].astype(np.int64)
    unsigned = words & 0xFFFF
    shift1, shift2 = unsigned[2], unsigned[6]
    check_shift(shift1, "shift1 (BSO row 2)", op)
    check_shift(shift2, "shift2 (BSO row 6)", op)
    return BsoChannels(
        bias=words[0] * 65536 + unsigned[1],
        shift1=shift1,
        scale=words[3],
        offset_scale=words[4],
        offset=words[5],
        shift2=shift2,
    )
