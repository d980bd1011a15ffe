"""Decoding the tensors of a conformance case (``FORMAT.md``, "Tensors") into NumPy arrays.

A tensor is ``{"dtype": ..., "shape": [...], "data": [...]}`` with the data flat in C order.
Decoding is strict, because a vector that is silently "repaired" would test something other than
what its producer meant: an integer out of range for its dtype, a float given for an integer
dtype, an unknown string or a length that does not match the shape is a :class:`CaseFormatError`.

Validation never loops over elements in Python on the normal path: ``set(map(type, data))``,
``min`` and ``max`` run in C over the list the JSON parser produced. Only once an element is known
to be bad does a Python loop look for the first offender, to name it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from quantemu.errors import InvalidInputError

_INTEGER_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
DTYPES: dict[str, np.dtype] = {
    name: np.dtype(name) for name in (*_INTEGER_DTYPES, "float16", "float32", "float64")
}

# The only strings allowed in float data (FORMAT.md): JSON itself has no non-finite numbers.
FLOAT_STRINGS: dict[str, float] = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}

_TENSOR_KEYS = ("dtype", "shape", "data")
_OPTIONAL_TENSOR_KEYS = ("bits",)


class CaseFormatError(InvalidInputError):
    """A conformance case that does not follow ``FORMAT.md``; the message is the reason."""


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for error messages.

    >>> json_type(True), json_type(3), json_type(2.5), json_type(None), json_type([1])
    ('boolean', 'integer', 'number', 'null', 'array')
    """
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def decode_tensor(obj: Any, where: str) -> np.ndarray:
    """Decode one tensor object into an array of exactly its dtype and shape.

    ``where`` names the tensor in error messages (``"inputs.X"``). Floats are parsed as doubles
    and then cast to the dtype; ``"bits": true`` float16 data are raw uint16 bit patterns.

    >>> decode_tensor({"dtype": "int8", "shape": [2], "data": [-128, 127]}, "x")
    array([-128,  127], dtype=int8)
    >>> decode_tensor({"dtype": "float16", "shape": [], "data": [31744], "bits": True}, "x")
    array(inf, dtype=float16)
    >>> try:
    ...     decode_tensor({"dtype": "uint8", "shape": [1], "data": [256]}, "inputs.x")
    ... except CaseFormatError as exc:
    ...     print(exc)
    inputs.x: element 0 = 256 is out of range for uint8 [0, 255]
    """
    if not isinstance(obj, dict):
        raise CaseFormatError(
            f"{where}: a tensor must be an object with dtype, shape and data, got {json_type(obj)}"
        )
    for key in _TENSOR_KEYS:
        if key not in obj:
            raise CaseFormatError(f"{where}: tensor has no {key!r}")
    for key in obj:
        if key not in _TENSOR_KEYS and key not in _OPTIONAL_TENSOR_KEYS:
            raise CaseFormatError(
                f"{where}: unknown tensor key {key!r} (a tensor has dtype, shape, data, bits)"
            )
    dtype = _decode_dtype(obj["dtype"], where)
    shape = _decode_shape(obj["shape"], where)
    data = obj["data"]
    if not isinstance(data, list):
        raise CaseFormatError(f"{where}: data must be an array, got {json_type(data)}")
    size = math.prod(shape)
    if len(data) != size:
        raise CaseFormatError(
            f"{where}: data has {len(data)} elements but shape {list(shape)} needs {size}"
        )
    bits = obj.get("bits", False)
    if not isinstance(bits, bool):
        raise CaseFormatError(f"{where}: bits must be true or false, got {json_type(bits)}")
    if bits:
        if dtype != np.float16:
            raise CaseFormatError(f'{where}: "bits": true is only defined for float16, not {dtype}')
        flat = _decode_ints(data, DTYPES["uint16"], f"{where} (float16 bit patterns)")
        flat = flat.view(np.float16)
    elif dtype.kind in "iu":
        flat = _decode_ints(data, dtype, where)
    else:
        flat = _decode_floats(data, dtype, where)
    return flat.reshape(shape)


def _decode_dtype(value: Any, where: str) -> np.dtype:
    if not isinstance(value, str):
        raise CaseFormatError(f"{where}: dtype must be a string, got {json_type(value)}")
    dtype = DTYPES.get(value)
    if dtype is None:
        raise CaseFormatError(
            f"{where}: unknown dtype {value!r}; expected one of {', '.join(DTYPES)}"
        )
    return dtype


def _decode_shape(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise CaseFormatError(f"{where}: shape must be an array, got {json_type(value)}")
    for dim in value:
        # bool is an int subclass in Python, but true/false is not a JSON integer.
        if type(dim) is not int or dim < 0:
            raise CaseFormatError(
                f"{where}: shape must be a list of non-negative integers, got {value!r}"
            )
        # NumPy cannot index past intp; such a shape is only "valid" with an empty dimension.
        if dim >= 2**62:
            raise CaseFormatError(f"{where}: shape dimension {dim} is too large")
    return tuple(value)


def _decode_ints(data: list, dtype: np.dtype, where: str) -> np.ndarray:
    if not set(map(type, data)) <= {int}:
        index, bad = next((i, x) for i, x in enumerate(data) if type(x) is not int)
        raise CaseFormatError(
            f"{where}: element {index} is {_describe(bad)}; {dtype} data must be JSON integers"
        )
    if data:
        info = np.iinfo(dtype)
        if min(data) < info.min or max(data) > info.max:
            index, bad = next((i, x) for i, x in enumerate(data) if not info.min <= x <= info.max)
            raise CaseFormatError(
                f"{where}: element {index} = {bad} is out of range for {dtype} "
                f"[{info.min}, {info.max}]"
            )
    return np.array(data, dtype=dtype)


def _decode_floats(data: list, dtype: np.dtype, where: str) -> np.ndarray:
    types = set(map(type, data))
    if not types <= {int, float, str}:
        index, bad = next((i, x) for i, x in enumerate(data) if type(x) not in (int, float, str))
        raise CaseFormatError(
            f"{where}: element {index} is {_describe(bad)}; {dtype} data must be numbers "
            'or the strings "nan", "inf", "-inf"'
        )
    numbers, specials = data, {}
    if str in types:
        specials = {i: x for i, x in enumerate(data) if type(x) is str}
        for i, text in specials.items():
            if text not in FLOAT_STRINGS:
                raise CaseFormatError(
                    f"{where}: element {i} is the string {text!r}; the only strings allowed "
                    'in float data are "nan", "inf", "-inf"'
                )
        # Placeholders first, so that the finiteness checks below see only real numbers.
        numbers = list(data)
        for i in specials:
            numbers[i] = 0.0
    try:
        wide = np.array(numbers, dtype=np.float64)
    except OverflowError:
        index = next(i for i, x in enumerate(numbers) if type(x) is int and abs(x) >= 2**1024)
        raise CaseFormatError(
            f"{where}: element {index} is an integer too large for a double"
        ) from None
    # json parses 1e999 as inf; a non-finite value must be written as a string, so that a typo
    # in an exponent does not silently become an infinity.
    if not np.isfinite(wide).all():
        index = int(np.argmax(~np.isfinite(wide)))
        raise CaseFormatError(
            f"{where}: element {index} = {data[index]!r} overflows a double; write non-finite "
            'values as the strings "nan", "inf", "-inf"'
        )
    with np.errstate(over="ignore"):
        flat = wide.astype(dtype)
    overflow = np.isinf(flat)
    if overflow.any():
        index = int(np.argmax(overflow))
        raise CaseFormatError(
            f"{where}: element {index} = {data[index]!r} is out of range for {dtype}; "
            'write infinities as the strings "inf", "-inf"'
        )
    if specials:
        flat[list(specials)] = [FLOAT_STRINGS[text] for text in specials.values()]
    return flat


def _describe(value: Any) -> str:
    if isinstance(value, (list, dict)):
        return f"an {json_type(value)}"
    return f"the {json_type(value)} {value!r}"
