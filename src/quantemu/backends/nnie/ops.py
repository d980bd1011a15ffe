"""NNIE 8-bit logarithmic quantization and dequantization (``nnie.md`` §3-§5), vectorized.

Codes are true form: bit 7 is the sign, bits 6..0 the index ``i`` of the level ``2^((i+z)/16)``;
``0x80`` ("-0") is zero and ``0x00`` the smallest positive level.

How :func:`log_quantize` is exact without trusting any ``log2``: the code of a float32 depends
only on its grid key (:mod:`.grid`): its sign, ``F = floor(32*log2|x|)`` and whether ``|x|`` is
exactly ``2^(F/32)``. The keys come from bit patterns and integer tables; the code of each key,
for a given ``z``, follows from ``nnie.md`` §3.1 in integer arithmetic (:func:`codes_of_keys`):

- ``x >= P = 2^((z-16)/16)``  iff  ``32*log2 x >= 2z-32``  iff  ``F >= 2z-32`` (an integer bound);
- ``x < -N``, ``N = 2^((z-15)/16)``  iff  ``F > 2z-30``, or ``F == 2z-30`` and ``|x|`` is not
  exactly ``2^(F/32)``;
- ``round(16*log2|x|) = floor((F+1)/2)``: ``16*log2|x|`` is never a half-integer (that would make
  ``|x| = 2^(odd/32)``, irrational), and ``floor(t/2) = floor(floor(t)/2)``.

So quantizing costs a few cheap passes (a shift, table gathers, a comparison) and matches the
exact-real definition for every float32, the page's threshold rule at ``P`` included.
"""

from __future__ import annotations

import functools
import sys

import numpy as np

from quantemu.backends.nnie import grid
from quantemu.backends.nnie.params import LEVELS, LogQuantParams
from quantemu.errors import InvalidInputError

CODE_ZERO = 0x80  # "-0": the code of zero
SIGN_BIT = 0x80


def codes_of_keys(sign: np.ndarray, f: np.ndarray, exact: np.ndarray, z) -> np.ndarray:
    """The code (uint8) of grid keys with fields ``sign``, ``F``, ``exact``, for offset(s) ``z``.

    Broadcasts: ``z`` may be an int or an array (for example a column of candidate offsets).
    Integer arithmetic only; ``|F| < 2^31`` and ``|z| < 2^15``, so int64 cannot overflow.
    """
    z = np.asarray(z, dtype=np.int64)
    index = ((f + 1) >> 1) - z  # round(16*log2|x|) - z
    positive = np.where(f >= 2 * z - 32, np.clip(index, 0, LEVELS - 1), CODE_ZERO)
    below_n = (f > 2 * z - 30) | ((f == 2 * z - 30) & ~exact)
    negative = np.where(below_n, SIGN_BIT | np.clip(index, 1, LEVELS - 1), CODE_ZERO)
    return np.where(sign == 0, positive, negative).astype(np.uint8)


def level_table(z: int) -> np.ndarray:
    """The float32 value of each of the 256 codes for offset ``z`` (``nnie.md`` §4).

    ``0x80`` is ``+0.0``; a negative code whose level underflows is ``-0.0``.
    """
    levels = grid.float32_levels(np.arange(LEVELS, dtype=np.int64) + z)
    table = np.concatenate([levels, -levels])
    table[CODE_ZERO] = 0.0
    return table


@functools.lru_cache(maxsize=64)
def _tables(z: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per ``z`` (read-only, cached): the code and the float32 value of every grid key, and the
    value of each of the 256 codes."""
    sign, f, exact = grid.key_fields()
    codes = np.full(grid.N_KEYS, CODE_ZERO, dtype=np.uint8)  # zero and flag keys -> 0x80
    codes[: grid.KEY_ZERO] = codes_of_keys(sign, f, exact, z)
    levels = level_table(z)
    values = levels[codes]
    for table in (codes, values, levels):
        table.flags.writeable = False
    return codes, values, levels


def float32_bits(x: object, what: str = "x") -> tuple[np.ndarray, tuple[int, ...]]:
    """Validate a float32 tensor; return its flat uint32 bit patterns and its shape."""
    arr = np.asarray(x)
    if arr.dtype != np.float32:
        remedy = "cast it with x.astype(np.float32) first"
        if arr.dtype == np.float64:
            remedy += " (this rounds each value to float32, as a float32 model would hold it)"
        raise InvalidInputError(
            f"{what} has dtype {arr.dtype} (shape {arr.shape}); NNIE log_quantize takes native "
            f"float32 tensors: {remedy}"
        )
    return np.ascontiguousarray(arr).reshape(-1).view(np.uint32), arr.shape


def float32_keys(x: object, what: str = "x") -> tuple[np.ndarray, tuple[int, ...]]:
    """Grid keys of a float32 tensor (flat) and its shape; NaN is an :class:`InvalidInputError`."""
    bits, shape = float32_bits(x, what)
    keys, nans = grid.grid_keys(bits)
    if nans.size:
        first = tuple(int(i) for i in np.unravel_index(nans[0], shape)) if shape else ()
        raise InvalidInputError(
            f"{what} contains {nans.size} NaN value(s) of {bits.size} (first at index {first}); "
            "NaN has no NNIE code (nnie.md §5): remove or replace NaNs before quantizing"
        )
    return keys, shape


def log_quantize(x: np.ndarray, clip: float, bits: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Quantize a float32 tensor to NNIE 8-bit true-form codes; return ``(codes, y)``.

    ``codes`` is uint8 and ``y = log_dequantize(codes, clip)`` float32, both of ``x``'s shape.
    ``x >= P`` (half the smallest level) maps to ``0x00`` and ``x = -N`` to ``0x80``, exactly as
    ``nnie.md`` §3 (which follows the NNIE document at ``P``, not MQBench). ``+-0`` give ``0x80``;
    ``+-inf`` give ``0x7F`` / ``0xFF``. Raises :class:`InvalidInputError` for NaN, a non-float32
    ``x`` or a bad ``clip``, and :class:`UnsupportedError` for ``bits != 8``.

    >>> codes, y = log_quantize(np.array([0.0, 1.0, -1.0, 0.5, 100.0], np.float32), clip=1.0)
    >>> [hex(c) for c in codes], y.tolist()
    (['0x80', '0x7f', '0xff', '0x6f', '0x7f'], [0.0, 1.0, -1.0, 0.5, 1.0])
    """
    z = LogQuantParams(clip, bits).z
    keys, shape = float32_keys(x)
    code_table, value_table, _ = _tables(z)
    # Two gathers by the same intp keys (faster in NumPy than gathering y by the uint8 codes).
    return np.take(code_table, keys).reshape(shape), np.take(value_table, keys).reshape(shape)


def log_dequantize(codes: np.ndarray, clip: float, bits: int = 8) -> np.ndarray:
    """The float32 value of NNIE 8-bit codes (``nnie.md`` §4); ``codes`` must be uint8.

    >>> log_dequantize(np.array([0x00, 0x7F, 0x80, 0xFF], np.uint8), clip=2.0).tolist()
    [0.008158388547599316, 2.0, 0.0, -2.0]
    """
    return dequantize_z(codes, LogQuantParams(clip, bits).z)


def dequantize_z(codes: object, z: int) -> np.ndarray:
    """:func:`log_dequantize` for a validated offset ``z``: gathers from the 256-entry table,
    two codes at a time where their bytes allow (:func:`_pair_table`).

    ``np.take`` rather than ``table[codes]``: NumPy's fancy indexing by uint8 is several times
    slower than ``take`` (which converts the indices once and gathers in a tight loop).
    """
    arr = np.asarray(codes)
    if arr.dtype != np.uint8:
        raise InvalidInputError(
            f"codes have dtype {arr.dtype} (shape {arr.shape}); NNIE codes are uint8 bytes "
            "(bit 7 sign, bits 6..0 index): convert with codes.astype(np.uint8) after checking "
            "that every value is in 0..255"
        )
    flat = arr.reshape(-1)
    if _PAIRS and flat.size % 2 == 0 and flat.flags.c_contiguous and flat.ctypes.data % 2 == 0:
        # Two codes per gather: a uint16 index into the table of value pairs (bit patterns).
        values = np.take(_pair_table(z), flat.view(np.uint16)).view(np.float32)
        return values.reshape(arr.shape)
    return np.take(_tables(z)[2], arr)


_PAIRS = sys.byteorder == "little"  # the pair table's layout assumes little-endian words


@functools.lru_cache(maxsize=32)
def _pair_table(z: int) -> np.ndarray:
    """Per ``z`` (read-only, 512 KiB, cached): for the uint16 ``c0 | c1 << 8`` of two adjacent
    codes, the bit patterns of their two float32 values as one uint64, ``c0``'s in the low half.
    Gathering pairs halves the gathers of :func:`dequantize_z`; the values are the same bits."""
    bits = _tables(z)[2].view(np.uint32).astype(np.uint64)
    table = (bits[None, :] | (bits[:, None] << np.uint64(32))).reshape(-1)  # index c1*256 + c0
    table.flags.writeable = False
    return table


def quantize_z(x: object, z: int) -> np.ndarray:
    """The codes of :func:`log_quantize` for a validated offset ``z``, without ``y`` (one gather
    by the grid keys instead of two)."""
    keys, shape = float32_keys(x)
    return np.take(_tables(z)[0], keys, mode="wrap").reshape(shape)  # keys < N_KEYS: no wrap
