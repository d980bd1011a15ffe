"""Tensor decoding: exact dtypes and values, and a precise reason for every malformed tensor."""

from __future__ import annotations

import numpy as np
import pytest
from conformance_helpers import tensor

from quantemu.conformance.tensors import DTYPES, CaseFormatError, decode_tensor


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_every_dtype_decodes_to_exactly_that_dtype(name):
    if name.startswith("float"):
        data = [0.5, -2.0, 3]  # a JSON integer is a valid float value
    else:
        info = np.iinfo(name)
        data = [int(info.min), 0, int(info.max)]
    arr = decode_tensor(tensor(name, [3], data), "x")
    assert arr.dtype == np.dtype(name)
    assert arr.shape == (3,)
    assert [float(v) for v in arr] == [float(v) for v in data]


def test_int64_and_uint64_extremes_are_exact():
    # Exact Python ints must not pass through a double on the way (2**63 - 1 is not a double).
    big = decode_tensor(tensor("int64", [2], [-(2**63), 2**63 - 1]), "x")
    assert big.tolist() == [-(2**63), 2**63 - 1]
    ubig = decode_tensor(tensor("uint64", [2], [0, 2**64 - 1]), "x")
    assert ubig.tolist() == [0, 2**64 - 1]


def test_shape_is_c_order_and_scalars_and_empty_tensors_work():
    arr = decode_tensor(tensor("int8", [2, 3], [0, 1, 2, 3, 4, 5]), "x")
    assert arr[1, 0] == 3
    scalar = decode_tensor(tensor("int32", [], [7]), "x")
    assert scalar.shape == () and scalar == 7
    empty = decode_tensor(tensor("float32", [0, 4], []), "x")
    assert empty.shape == (0, 4) and empty.dtype == np.float32


def test_floats_parse_as_double_then_cast():
    # 0.1 is not a float32; the double 0.1 rounds to float32 0x3dcccccd.
    arr = decode_tensor(tensor("float32", [1], [0.1]), "x")
    assert arr.view(np.uint32)[0] == 0x3DCCCCCD
    # The shortest decimal of the float32 widening round-trips exactly (FORMAT.md).
    value = float(np.float32(1 / 3))
    assert decode_tensor(tensor("float32", [1], [value]), "x")[0] == np.float32(1 / 3)


def test_non_finite_strings_and_negative_zero():
    arr = decode_tensor(tensor("float32", [4], ["nan", "inf", "-inf", -0.0]), "x")
    assert np.isnan(arr[0]) and arr[1] == np.inf and arr[2] == -np.inf
    assert arr.view(np.uint32)[3] == 0x80000000


def test_float16_bit_patterns():
    arr = decode_tensor(tensor("float16", [4], [0x3C00, 0x8000, 0x7C00, 0x0001], bits=True), "x")
    assert arr.dtype == np.float16
    assert arr.view(np.uint16).tolist() == [0x3C00, 0x8000, 0x7C00, 0x0001]
    assert arr[0] == 1.0 and arr[2] == np.inf


BAD_TENSORS = [
    (tensor("int4", [1], [0]), "unknown dtype 'int4'"),
    (tensor(8, [1], [0]), "dtype must be a string, got integer"),
    (tensor("int8", 3, [0, 0, 0]), "shape must be an array, got integer"),
    (tensor("int8", [-1], []), "shape must be a list of non-negative integers"),
    (tensor("int8", [2.0], [0, 0]), "shape must be a list of non-negative integers"),
    (tensor("int8", [True], [0]), "shape must be a list of non-negative integers"),
    (tensor("int8", [2, 2], [1, 2, 3]), "data has 3 elements but shape [2, 2] needs 4"),
    (tensor("int8", [1], {"a": 1}), "data must be an array, got object"),
    (tensor("int8", [3], [0, 128, 0]), "element 1 = 128 is out of range for int8 [-128, 127]"),
    (tensor("int8", [2], [-129, 0]), "element 0 = -129 is out of range for int8"),
    (tensor("uint8", [2], [0, -1]), "element 1 = -1 is out of range for uint8 [0, 255]"),
    (tensor("int64", [1], [2**63]), "out of range for int64"),
    (tensor("uint64", [1], [2**64]), "out of range for uint64"),
    (tensor("int8", [3], [1, 2.0, 3]), "element 1 is the number 2.0; int8 data must be JSON"),
    (tensor("int16", [2], [1, True]), "element 1 is the boolean True"),
    (tensor("int32", [2], [1, "2"]), "element 1 is the string '2'"),
    (tensor("int32", [2], [1, None]), "element 1 is the null None"),
    (tensor("int32", [2], [1, [2]]), "element 1 is an array"),
    (tensor("float32", [2], [1.0, "NaN"]), "element 1 is the string 'NaN'; the only strings"),
    (tensor("float32", [1], ["infinity"]), "the string 'infinity'"),
    (tensor("float32", [2], [1.0, False]), "element 1 is the boolean False"),
    (tensor("float64", [2], [0.0, float("inf")]), "element 1 = inf overflows a double"),
    (tensor("float64", [1], [10**400]), "element 0 is an integer too large for a double"),
    (tensor("float32", [2], [1.0, 1e39]), "element 1 = 1e+39 is out of range for float32"),
    (tensor("float16", [1], [70000.0]), "out of range for float16"),
    (tensor("float32", [1], [0], bits=True), '"bits": true is only defined for float16'),
    (tensor("float16", [1], [70000], bits=True), "(float16 bit patterns): element 0 = 70000"),
    (tensor("float16", [1], [-1], bits=True), "out of range for uint16"),
    (tensor("float16", [1], [1.5], bits=True), "element 0 is the number 1.5"),
    (tensor("float16", [1], [1], bits="yes"), "bits must be true or false, got string"),
    ({"dtype": "int8", "shape": [1]}, "tensor has no 'data'"),
    ({"shape": [1], "data": [1]}, "tensor has no 'dtype'"),
    (tensor("int8", [1], [1], order="F"), "unknown tensor key 'order'"),
    ([1, 2, 3], "a tensor must be an object with dtype, shape and data, got array"),
]


@pytest.mark.parametrize(("obj", "reason"), BAD_TENSORS, ids=[r for _, r in BAD_TENSORS])
def test_malformed_tensors_say_why(obj, reason):
    with pytest.raises(CaseFormatError) as exc:
        decode_tensor(obj, "inputs.X")
    assert str(exc.value).startswith("inputs.X")
    assert reason in str(exc.value)
