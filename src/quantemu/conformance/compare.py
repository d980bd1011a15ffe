"""Exact comparison of an operator's outputs with a case's expected outputs (``FORMAT.md`` step 3).

Tensors must agree in dtype, shape and every element. Integers compare by value; floats compare
by bit pattern, so ``-0.0`` differs from ``+0.0`` and a float32 one ulp off is caught, except that
every NaN equals every other NaN (the format does not pin NaN payloads). Counters compare by value.
There is no tolerance anywhere: the point of the suite is bit-exactness.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Mismatch:
    """How one expected output differs from what the operator returned.

    ``reason`` always says what differs. For element differences ``index`` is the first differing
    position in C order (``nd_index`` the same as a multi-dimensional index), ``expected`` and
    ``actual`` the values there (Python numbers, exact), ``count`` how many of ``size`` elements
    differ and ``dtype`` their dtype name. Structural differences (missing output, wrong dtype or
    shape) have no index and ``count`` 0.
    """

    output: str
    reason: str
    index: int | None = None
    nd_index: tuple[int, ...] | None = None
    expected: int | float | None = None
    actual: int | float | None = None
    count: int = 0
    size: int = 0
    dtype: str = ""


def compare_outputs(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> tuple[Mismatch, ...]:
    """Every mismatch between ``expected`` and ``actual``, in the order of ``expected``.

    Results the case does not expect are ignored: a case pins down only what its producer saw.
    """
    found = []
    for name, want in expected.items():
        if name not in actual:
            got = ", ".join(sorted(map(str, actual))) or "nothing"
            found.append(Mismatch(name, f"output missing from the result (it returned {got})"))
            continue
        mismatch = compare_output(name, want, actual[name])
        if mismatch is not None:
            found.append(mismatch)
    return tuple(found)


def compare_output(name: str, expected: np.ndarray | int, actual: Any) -> Mismatch | None:
    """``None`` when ``actual`` reproduces ``expected`` exactly, else the first difference."""
    if isinstance(expected, np.ndarray):
        return _compare_tensor(name, expected, actual)
    return _compare_counter(name, expected, actual)


def _compare_counter(name: str, expected: int, actual: Any) -> Mismatch | None:
    value = _as_int(actual)
    if value is None:
        return Mismatch(name, f"expected an integer counter, got {_describe(actual)}")
    if value == expected:
        return None
    return Mismatch(name, "counter differs", expected=expected, actual=value, count=1, size=1)


def _as_int(value: Any) -> int | None:
    # bool is excluded on purpose: a counter returned as True/False is a type error in the op.
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
        return int(value)
    return None


def _compare_tensor(name: str, expected: np.ndarray, actual: Any) -> Mismatch | None:
    if isinstance(actual, np.generic):
        actual = np.asarray(actual)  # a NumPy scalar is a 0-d tensor of its dtype
    if not isinstance(actual, np.ndarray):
        return Mismatch(name, f"expected a {expected.dtype} tensor, got {_describe(actual)}")
    if actual.dtype != expected.dtype:
        return Mismatch(name, f"dtype {actual.dtype}, expected {expected.dtype}")
    if actual.shape != expected.shape:
        return Mismatch(name, f"shape {actual.shape}, expected {expected.shape}")
    differs = differing_elements(expected, actual)
    first = int(np.argmax(differs)) if differs.size else 0
    if differs.size == 0 or not differs[first]:
        return None
    nd_index = tuple(int(i) for i in np.unravel_index(first, expected.shape))
    count = int(np.count_nonzero(differs))
    return Mismatch(
        name,
        f"{count} of {differs.size} elements differ",
        index=first,
        nd_index=nd_index,
        expected=expected.reshape(-1)[first].item(),
        actual=actual.reshape(-1)[first].item(),
        count=count,
        size=differs.size,
        dtype=str(expected.dtype),
    )


def differing_elements(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """Flat boolean mask of the elements that differ; same dtype and shape required.

    >>> a = np.array([0.0, np.nan, 1.0], dtype=np.float32)
    >>> differing_elements(a, np.array([-0.0, -np.nan, 1.0], dtype=np.float32))
    array([ True, False, False])
    """
    want = np.ascontiguousarray(expected).reshape(-1)
    got = np.ascontiguousarray(actual).reshape(-1)
    if want.dtype.kind != "f":
        return want != got
    bits = np.dtype(f"u{want.dtype.itemsize}")
    differs = want.view(bits) != got.view(bits)
    if differs.any():
        differs &= ~(np.isnan(want) & np.isnan(got))
    return differs


def format_value(value: int | float | None, dtype: str) -> str:
    """A value as a report shows it: floats in their dtype's shortest form plus their bits.

    >>> format_value(-0.0, "float32"), format_value(7, "int8")
    ('-0.0 (0x80000000)', '7')
    """
    if isinstance(value, float) and dtype in ("float16", "float32", "float64"):
        scalar = np.dtype(dtype).type(value)
        width = scalar.itemsize * 2
        pattern = int(np.asarray(scalar).view(f"u{scalar.itemsize}"))
        return f"{scalar!s} (0x{pattern:0{width}x})"
    return str(value)


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {value.shape}"
    return f"a {type(value).__name__}"
