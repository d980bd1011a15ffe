"""The NNIE conformance adapters: their attributes, outputs and how they report bad requests.

That every public vector passes is checked for every backend in
``tests/conformance/test_conformance_backends.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from quantemu.backends import registry
from quantemu.backends.nnie.conformance import conformance_log_dequantize, conformance_log_quantize
from quantemu.conformance import Status
from quantemu.errors import InvalidInputError, UnsupportedError


def test_registered_with_the_page_attributes():
    for op in ("log_quantize", "log_dequantize"):
        assert registry.lookup("nnie", op).attrs == frozenset({"clip", "bits"})


def test_adapter_outputs():
    out = conformance_log_quantize({"x": np.array([1.0, -0.5], np.float32)}, {"clip": 1, "bits": 8})
    assert out["code"].tolist() == [0x7F, 0xEF] and out["y"].tolist() == [1.0, -0.5]
    out = conformance_log_dequantize({"code": np.array([0x7F], np.uint8)}, {"clip": 1.0, "bits": 8})
    assert out["y"].tolist() == [1.0]


def test_adapter_errors():
    x = {"x": np.ones(2, np.float32)}
    with pytest.raises(UnsupportedError, match="no public specification"):
        conformance_log_quantize(x, {"clip": 1.0, "bits": 16})
    with pytest.raises(InvalidInputError, match=r"exactly clip and bits .*missing: \['bits'\]"):
        conformance_log_quantize(x, {"clip": 1.0})
    with pytest.raises(InvalidInputError, match=r"unknown: \['zero'\]"):
        conformance_log_quantize(x, {"clip": 1.0, "bits": 8, "zero": 0})
    with pytest.raises(InvalidInputError, match="expects exactly one input 'code'"):
        conformance_log_dequantize(x, {"clip": 1.0, "bits": 8})


def test_16_bit_case_is_reported_unsupported():
    from quantemu.conformance.reader import Case
    from quantemu.conformance.runner import run_case

    case = Case(
        file="t.jsonl",
        line=1,
        id="nnie/log_quantize/x",
        backend="nnie",
        op="log_quantize",
        attrs={"clip": 1.0, "bits": 16},
        inputs={"x": np.ones(2, np.float32)},
        expected={},
        source="",
        note="",
    )
    result = run_case(case)
    assert result.status is Status.UNSUPPORTED and "16-bit" in result.reason
