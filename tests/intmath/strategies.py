"""Boundary-biased hypothesis strategies and reference helpers shared by the intmath tests.

Random integers almost never hit the values where integer arithmetic goes wrong (0, ±1, powers of
two and their neighbours, the int64 and int32 rails, rounding ties), so every strategy here mixes
a list of such values with uniform draws. Import as ``from tests.intmath.strategies import ...``.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

SIGNED_DTYPES = (np.int8, np.int16, np.int32, np.int64)
UNSIGNED_DTYPES = (np.uint8, np.uint16, np.uint32, np.uint64)
INT_DTYPES = SIGNED_DTYPES + UNSIGNED_DTYPES

#: Shift amounts where shifting goes wrong: 0, small, around 32, around 64 and far beyond.
SPECIAL_SHIFTS = (0, 1, 2, 3, 7, 15, 16, 30, 31, 32, 33, 34, 62, 63, 64, 65, 66, 100)


def boundary_values(max_bits: int = 130) -> list[int]:
    """0, ±1, ±2**k, ±2**k ± 1 for k < max_bits, and the int32 / int64 rails (sorted)."""
    vals = {0, 1, -1, INT64_MIN, INT64_MAX, INT32_MIN, INT32_MAX, INT64_MIN + 1, INT64_MAX - 1}
    for k in range(1, max_bits):
        for base in (2**k, -(2**k)):
            vals.update((base - 1, base, base + 1))
    return sorted(vals)


_BOUNDARY = boundary_values()


_CORE = (
    0,
    1,
    -1,
    2,
    -2,
    3,
    -3,
    INT64_MIN,
    INT64_MAX,
    INT64_MIN + 1,
    INT64_MAX - 1,
    INT32_MIN,
    INT32_MAX,
)


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


def int_operands(elements=None) -> st.SearchStrategy:
    """Any accepted integer operand: NumPy arrays of every int dtype, object arrays, Python ints."""
    scalars = int64_values() | big_ints() if elements is None else elements
    return st.one_of(
        int_arrays(elements=elements),
        object_arrays(elements=elements),
        scalars,
    )


# --- comparing with the references ---------------------------------------------------------------


def as_python(v) -> list | int:
    """Python ints (a nested list for arrays) from a NumPy array, object array or scalar."""
    if isinstance(v, np.ndarray):
        return np.asarray(v, dtype=object).tolist()
    return int(v)


def apply_reference(fn, *operands, **kwargs):
    """Apply the scalar reference ``fn`` element-wise over broadcast operands (Python ints)."""
    if not any(isinstance(op, np.ndarray) for op in operands):
        return fn(*[int(op) for op in operands], **kwargs)
    arrays = [np.asarray(op, dtype=object) for op in operands]
    b = np.broadcast_arrays(*arrays)
    flat = [fn(*[int(a.flat[i]) for a in b], **kwargs) for i in range(b[0].size)]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(b[0].shape).tolist()


def fits_int64(v) -> bool:
    """Whether an operand's values are all int64 (what ``as_int_operand`` keeps in int64)."""
    if isinstance(v, np.ndarray):
        return v.dtype != object and not (v.dtype == np.uint64 and v.size and v.max() > INT64_MAX)
    return INT64_MIN <= int(v) <= INT64_MAX


def assert_matches(result, expected, *, object_result: bool):
    """``result == expected`` element-wise, with the contract's type: Python int for scalar
    calls; int64 or object arrays otherwise."""
    if not isinstance(expected, list):
        assert type(result) is int, type(result)
        assert result == expected
        return
    assert isinstance(result, np.ndarray), type(result)
    assert result.dtype == (object if object_result else np.int64), result.dtype
    assert result.tolist() == expected
