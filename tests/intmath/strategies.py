"""Operand strategies and reference helpers for the intmath tests.

The boundary-biased value strategies live in :mod:`tests.strategies`; they are re-exported here so
the intmath tests import everything from one place (``from tests.intmath.strategies import ...``).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from tests.strategies import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    big_ints,
    int32_values,
    int64_values,
    int_arrays,
    object_arrays,
    shifts,
)

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "apply_reference",
    "as_python",
    "assert_matches",
    "big_ints",
    "fits_int64",
    "int32_values",
    "int64_values",
    "int_arrays",
    "int_operands",
    "object_arrays",
    "shifts",
]


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
