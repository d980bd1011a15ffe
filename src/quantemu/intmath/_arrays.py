"""Operand normalisation shared by every :mod:`quantemu.intmath` primitive.

Primitives accept NumPy integer arrays (any width, signed or unsigned), object arrays of Python
ints, and Python ints (any size). They compute on int64 when every value fits, and on object
arrays of exact Python ints otherwise, so nothing silently wraps. A Python-int scalar in gives a
Python int out; an array in gives an array out (int64, or object when the input was object or
did not fit in int64).
"""

from __future__ import annotations

import numbers

import numpy as np

from quantemu.errors import InvalidInputError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def _reject(func: str, name: str, what: str) -> InvalidInputError:
    return InvalidInputError(
        f"{func}: {name} must be integers (a NumPy integer array or Python ints), got {what}; "
        "convert explicitly after checking that the values are integral, "
        "e.g. np.asarray(v, dtype=np.int64)"
    )


def as_int_operand(x, *, func: str, name: str) -> tuple[np.ndarray, bool]:
    """``(array, is_scalar)`` for an integer operand; floats, bools and strings are errors.

    The array is int64 when every value fits in int64, and an object array of Python ints
    otherwise (uint64 values above 2**63 - 1, Python ints of any size, object input).
    """
    if isinstance(x, (bool, np.bool_)):
        raise _reject(func, name, f"the bool {x!r}")
    if isinstance(x, numbers.Integral):
        v = int(x)
        if INT64_MIN <= v <= INT64_MAX:
            return np.asarray(v, dtype=np.int64), True
        return np.asarray(v, dtype=object), True
    arr = x if isinstance(x, np.ndarray) else np.asarray(x)
    if not isinstance(x, np.ndarray) and arr.size == 0:
        arr = arr.astype(np.int64)  # an empty list has no integer dtype to infer
    kind = arr.dtype.kind
    if kind == "i":
        return arr.astype(np.int64, copy=False), False
    if kind == "u":
        if arr.dtype.itemsize == 8 and arr.size and int(arr.max()) > INT64_MAX:
            return arr.astype(object), False
        return arr.astype(np.int64, copy=False), False
    if kind == "O":
        flat = arr.ravel()
        bad = [v for v in flat if isinstance(v, bool) or not isinstance(v, numbers.Integral)]
        if bad:
            raise _reject(
                func, name, f"an object array holding {bad[0]!r} ({type(bad[0]).__name__})"
            )
        return np.vectorize(int, otypes=[object])(arr) if arr.size else arr, False
    raise _reject(func, name, f"an array of dtype {arr.dtype}")


def dtype_bound(x) -> int | None:
    """``max |v|`` over the dtype of a NumPy integer array of 32 bits or fewer, else None.

    A bound proved by the dtype alone (no scan). For such ``x``, :func:`as_int_operand` returns a
    fresh int64 copy (the dtype changes), which the caller may overwrite.
    """
    if isinstance(x, np.ndarray) and x.dtype.kind in "iu" and x.dtype.itemsize <= 4:
        info = np.iinfo(x.dtype)
        return max(-int(info.min), int(info.max))
    return None


def as_result(arr: np.ndarray, is_scalar: bool):
    """Python int for a scalar call, the array otherwise."""
    if is_scalar:
        return int(arr[()]) if isinstance(arr, np.ndarray) else int(arr)
    return arr


def check_bits(bits, *, func: str, low: int = 1, high: int = 64) -> int:
    """Validate a width argument: a Python int in ``[low, high]``."""
    if isinstance(bits, (bool, np.bool_)) or not isinstance(bits, numbers.Integral):
        raise InvalidInputError(f"{func}: bits must be an int in [{low}, {high}], got {bits!r}")
    if not low <= int(bits) <= high:
        raise InvalidInputError(
            f"{func}: bits = {int(bits)} is outside [{low}, {high}]; "
            f"widths from {low} to {high} bits are supported"
        )
    return int(bits)
