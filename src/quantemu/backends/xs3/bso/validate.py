"""Input checks shared by the XS3 operators: dtypes, shapes and lib_nn's channel constraints.

Each check raises :class:`~quantemu.errors.InvalidInputError` naming the operator, the tensor,
the offending values and the remedy (DESIGN principle 7).
"""

from __future__ import annotations

import numpy as np

from quantemu.errors import InvalidInputError


def check_tensor(arr, name: str, dtype, ndim: int | tuple[int, int], op: str) -> np.ndarray:
    """``arr`` must be a NumPy array of exactly ``dtype`` with ``ndim`` dimensions.

    ``ndim`` may be a pair ``(n, n + 1)``: the operator also takes a leading batch axis.
    """
    dtype = np.dtype(dtype)
    if not isinstance(arr, np.ndarray):
        raise InvalidInputError(
            f"{op}: {name} must be a NumPy {dtype} array, got {type(arr).__name__}"
        )
    if arr.dtype != dtype:
        raise InvalidInputError(
            f"{op}: {name} must have dtype {dtype}, got {arr.dtype}; lib_nn reads {name} as "
            f"{dtype}: check the values fit and convert with .astype(np.{dtype})"
        )
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if arr.ndim not in allowed:
        batch = f"; {allowed[1]} with a leading batch axis" if len(allowed) > 1 else ""
        raise InvalidInputError(
            f"{op}: {name} must have {allowed[0]} dimensions, got shape {arr.shape}{batch}"
        )
    if 0 in arr.shape:
        raise InvalidInputError(f"{op}: {name} has an empty dimension, shape {arr.shape}")
    return arr


def check_shape(arr: np.ndarray, name: str, expected: tuple[int, ...], why: str, op: str) -> None:
    """``arr.shape`` must equal ``expected``; ``why`` says where the expectation comes from."""
    if arr.shape != tuple(expected):
        raise InvalidInputError(
            f"{op}: {name} has shape {arr.shape}, expected {tuple(expected)} ({why})"
        )


def check_multiple_of_4(value: int, what: str, op: str) -> None:
    """lib_nn needs word-aligned pixels and channel groups: channel counts are multiples of 4."""
    if value % 4:
        up = value + (-value % 4)
        raise InvalidInputError(
            f"{op}: {what} = {value} is not a multiple of 4; the XS3 VPU loads only from "
            f"word-aligned addresses: pad the channels with zeros to {up}"
        )
