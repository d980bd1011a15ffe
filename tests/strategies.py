"""Boundary-biased hypothesis strategies shared by every test package.

Random integers almost never hit the values where integer arithmetic goes wrong (0, ±1, powers of
two and their neighbours, the rails of a bit width, rounding ties), so every strategy here mixes a
list of such values with uniform draws. Backend test packages build their composite strategies
(register sets, packed tensors, geometries) on these: ``from tests.strategies import ...``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from hypothesis import strategies as st

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

SIGNED_DTYPES = (np.int8, np.int16, np.int32, np.int64)
UNSIGNED_DTYPES = (np.uint8, np.uint16, np.uint32, np.uint64)
INT_DTYPES = SIGNED_DTYPES + UNSIGNED_DTYPES

#: Shift amounts where shifting goes wrong: 0, small, around 32, around 64 and far beyond.
SPECIAL_SHIFTS = (0, 1, 2, 3, 7, 15, 16, 30, 31, 32, 33, 34, 62, 63, 64, 65, 66, 100)


# --- fixed-width edges ---------------------------------------------------------------------------


def signed_edges(bits: int, extra: Iterable[int] = ()) -> list[int]:
    """The edges of a signed ``bits``-bit value: both rails and their neighbours, -1, 0, 1."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return sorted({lo, lo + 1, -1, 0, 1, hi - 1, hi, *extra})


def unsigned_edges(bits: int, extra: Iterable[int] = ()) -> list[int]:
    """The edges of an unsigned ``bits``-bit field under both its unsigned and its two's-complement
    reading: 0, 1, 2, the largest positive signed value and its neighbours, the top and top - 1."""
    top = (1 << bits) - 1
    half = top >> 1  # the largest positive two's-complement value
    edges = {0, 1, 2, half - 1, half, half + 1, top - 1, top, *extra}
    return sorted(v for v in edges if 0 <= v <= top)


def edge_biased(edges: Iterable[int], lo: int, hi: int) -> st.SearchStrategy[int]:
    """Half the draws from ``edges`` (those in ``[lo, hi]``), half uniform over ``[lo, hi]``."""
    inside = [v for v in edges if lo <= v <= hi] or [lo]
    return st.one_of(st.sampled_from(inside), st.integers(lo, hi))


def signed_ints(bits: int, extra: Iterable[int] = ()) -> st.SearchStrategy[int]:
    """A signed ``bits``-bit value, boundary-biased (``extra`` adds edges of the caller's own)."""
    return edge_biased(signed_edges(bits, extra), -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def unsigned_ints(bits: int, extra: Iterable[int] = ()) -> st.SearchStrategy[int]:
    """A raw ``bits``-bit field value, often at a boundary of its unsigned or signed reading."""
    return edge_biased(unsigned_edges(bits, extra), 0, (1 << bits) - 1)


def rail_near(spread: int, bits: int = 32) -> st.SearchStrategy[int]:
    """Signed ``bits``-bit values within ``spread`` of either rail (sums of that size cross it)."""
    rail = (1 << (bits - 1)) - 1
    near = st.integers(0, spread)
    return st.one_of(near.map(lambda d: rail - d), near.map(lambda d: -rail - 1 + d))


# --- arbitrary ranges ----------------------------------------------------------------------------


def boundary_values(max_bits: int = 130) -> list[int]:
    """0, ±1, ±2**k, ±2**k ± 1 for k < max_bits, and the int32 / int64 rails (sorted)."""
    vals = {0, 1, -1, INT64_MIN, INT64_MAX, INT32_MIN, INT32_MAX, INT64_MIN + 1, INT64_MAX - 1}
    for k in range(1, max_bits):
        for base in (2**k, -(2**k)):
            vals.update((base - 1, base, base + 1))
    return sorted(vals)


_BOUNDARY = boundary_values()

_CORE = (0, 1, -1, 2, -2, 3, -3, INT64_MIN, INT64_MAX, INT64_MIN + 1, INT64_MAX - 1)
_CORE += (INT32_MIN, INT32_MAX)


def boundary_ints(min_value: int, max_value: int) -> st.SearchStrategy[int]:
    """Integers in ``[min_value, max_value]``: a third from a short list of the most dangerous
    values (0, ±1, ±2, ±3, the rails of int32, int64 and the range itself), a third from the full
    boundary list (±2**k ± 1), a third uniform."""
    core = sorted({v for v in (*_CORE, min_value, max_value) if min_value <= v <= max_value})
    special = [v for v in _BOUNDARY if min_value <= v <= max_value] or core
    return st.one_of(
        st.sampled_from(core), st.sampled_from(special), st.integers(min_value, max_value)
    )


def int64_values() -> st.SearchStrategy[int]:
    """Python ints in int64, boundary-biased."""
    return boundary_ints(INT64_MIN, INT64_MAX)


def int32_values() -> st.SearchStrategy[int]:
    return boundary_ints(INT32_MIN, INT32_MAX)


def big_ints(max_bits: int = 200) -> st.SearchStrategy[int]:
    """Python ints of any size (mostly outside int64), boundary-biased."""
    return boundary_ints(-(2**max_bits), 2**max_bits)


def shifts(min_value: int = 0, max_value: int = 100) -> st.SearchStrategy[int]:
    """Shift amounts: the special ones (and their negatives) in range, plus uniform draws."""
    special = sorted({v for s in SPECIAL_SHIFTS for v in (s, -s)})
    special = [v for v in special if min_value <= v <= max_value] or [min_value]
    return st.one_of(st.sampled_from(special), st.integers(min_value, max_value))


# --- arrays --------------------------------------------------------------------------------------


def dtype_range(dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


@st.composite
def int_arrays(draw, dtype=None, *, elements=None, min_size: int = 1, max_size: int = 12):
    """A 1-D NumPy array of ``dtype`` (drawn from int8..uint64 when None).

    ``elements`` is a strategy of Python ints; values outside the dtype are dropped (default:
    boundary-biased values over the whole dtype range).
    """
    dtype = np.dtype(draw(st.sampled_from(INT_DTYPES)) if dtype is None else dtype)
    lo, hi = dtype_range(dtype)
    elems = boundary_ints(lo, hi) if elements is None else elements.filter(lambda v: lo <= v <= hi)
    values = draw(st.lists(elems, min_size=min_size, max_size=max_size))
    return np.array(values, dtype=dtype)


@st.composite
def object_arrays(draw, elements=None, *, min_size: int = 1, max_size: int = 8):
    """A 1-D object array of Python ints (huge ones included by default)."""
    elems = st.one_of(big_ints(), int64_values()) if elements is None else elements
    values = draw(st.lists(elems, min_size=min_size, max_size=max_size))
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr
