"""Running cases against fake operators: every case ends passed, failed, error or unsupported."""

from __future__ import annotations

import numpy as np
import pytest
from conformance_helpers import make_case, tensor, write_vectors

from quantemu.conformance.reader import collect_files
from quantemu.conformance.runner import Status, run_suite
from quantemu.errors import InvalidInputError, UnsupportedError


def run(tmp_path, lines):
    path = write_vectors(tmp_path / "v.jsonl", lines)
    return run_suite(collect_files([path]))


def only(result):
    (r,) = result.results
    return r


def test_a_correct_operator_passes(tmp_path, fake_registry):
    result = run(tmp_path, [make_case()])
    assert only(result).status is Status.PASSED
    assert result.exit_code == 0
    assert result.totals().passed == 1


def test_one_lsb_off_in_one_element_fails_with_index_values_and_count(tmp_path, fake_registry):
    case = make_case()
    case["expected"]["Y"]["data"][4] += 1  # element [1, 1]: X + k = 6, expected now says 7
    r = only(run(tmp_path, [case]))
    assert r.status is Status.FAILED
    (m,) = r.mismatches
    assert (m.output, m.index, m.nd_index) == ("Y", 4, (1, 1))
    assert (m.expected, m.actual, m.count, m.size) == (7, 6, 1, 6)
    assert (r.file, r.line, r.id) == (str(tmp_path / "v.jsonl"), 1, "xs3/add/000000")


def test_wrong_dtype_fails(tmp_path, fake_registry):
    case = make_case(expected={"Y": tensor("int32", [2, 3], [2, -1, 4, 5, 6, 7])})
    r = only(run(tmp_path, [case]))
    assert r.status is Status.FAILED
    assert r.mismatches[0].reason == "dtype int16, expected int32"


def test_counter_off_by_one_fails(tmp_path, fake_registry):
    case = make_case()
    case["expected"]["SAT"] = 2
    r = only(run(tmp_path, [case]))
    assert r.status is Status.FAILED
    (m,) = r.mismatches
    assert (m.output, m.expected, m.actual) == ("SAT", 2, 1)


def test_float_outputs_compare_by_bits(tmp_path, fake_registry):
    @fake_registry.register("xs3", "floats")
    def floats(inputs, attrs):
        # A NaN with a payload other than the decoder's, and +0.0 where -0.0 is expected.
        nan = np.array([0x7FC00001], dtype=np.uint32).view(np.float32)[0]
        return {"y": np.array([nan, 0.0, 1.5], dtype=np.float32)}

    case = make_case(
        "f/0", op="floats", attrs={}, expected={"y": tensor("float32", [3], ["nan", -0.0, 1.5])}
    )
    r = only(run(tmp_path, [case]))
    assert r.status is Status.FAILED
    (m,) = r.mismatches
    assert (m.index, m.count) == (1, 1)
    assert (str(m.expected), str(m.actual)) == ("-0.0", "0.0")


def test_missing_output_fails(tmp_path, fake_registry):
    case = make_case(expected={"Y": make_case()["expected"]["Y"], "OTHER": 0})
    r = only(run(tmp_path, [case]))
    assert r.status is Status.FAILED
    assert r.mismatches[0].output == "OTHER"
    assert "output missing" in r.mismatches[0].reason


def test_unknown_attribute_is_unsupported(tmp_path, fake_registry):
    r = only(run(tmp_path, [make_case(attrs={"k": 1, "rounding": "even"})]))
    assert r.status is Status.UNSUPPORTED
    assert r.reason == "xs3/add does not know attribute 'rounding' (it knows: k)"


def test_unregistered_pairs_are_unsupported_with_the_reason(tmp_path, fake_registry):
    result = run(
        tmp_path,
        [
            make_case("a", backend="tpu"),
            make_case("b", backend="nvdla", op="sdp"),
            make_case("c", op="conv9"),
        ],
    )
    reasons = [r.reason for r in result.results]
    assert all(r.status is Status.UNSUPPORTED for r in result.results)
    assert reasons[0].startswith("unknown backend 'tpu'; quantemu knows xs3")
    assert reasons[1].startswith("unknown backend 'nvdla'")
    assert reasons[2] == "backend 'xs3' has no operator 'conv9'; registered: add"


def test_missing_op_of_an_implemented_backend_is_unsupported(tmp_path, fake_registry):
    r = only(run(tmp_path, [make_case(op="conv9")]))
    assert r.status is Status.UNSUPPORTED
    assert r.reason == "backend 'xs3' has no operator 'conv9'; registered: add"


def test_operator_raising_unsupported_error_is_unsupported(tmp_path, fake_registry):
    @fake_registry.register("xs3", "picky", attrs={"bits"})
    def picky(inputs, attrs):
        raise UnsupportedError(f"bits={attrs['bits']}: only 8-bit is specified")

    r = only(run(tmp_path, [make_case(op="picky", attrs={"bits": 16})]))
    assert (r.status, r.reason) == (Status.UNSUPPORTED, "bits=16: only 8-bit is specified")


def test_operator_rejecting_its_inputs_is_an_error(tmp_path, fake_registry):
    @fake_registry.register("xs3", "strict")
    def strict(inputs, attrs):
        raise InvalidInputError("X: C_in = 3 is not a multiple of 4")

    r = only(run(tmp_path, [make_case(op="strict", attrs={})]))
    assert (r.status, r.reason) == (Status.ERROR, "X: C_in = 3 is not a multiple of 4")
    assert r.traceback == ""


def test_a_crash_is_an_internal_error_and_the_run_goes_on(tmp_path, fake_registry):
    @fake_registry.register("xs3", "buggy")
    def buggy(inputs, attrs):
        return {"Y": 1 // 0}

    result = run(tmp_path, [make_case("a", op="buggy", attrs={}), make_case("b")])
    crash, after = result.results
    assert crash.status is Status.ERROR
    assert crash.reason == "internal error: ZeroDivisionError: integer division or modulo by zero"
    assert "Traceback (most recent call last)" in crash.traceback
    assert "1 // 0" in crash.traceback
    assert after.status is Status.PASSED and after.id == "b"


@pytest.mark.parametrize("returned", [None, [1, 2], np.zeros(3)], ids=["none", "list", "array"])
def test_an_operator_returning_no_mapping_is_an_error(tmp_path, fake_registry, returned):
    fake_registry.register("xs3", "odd")(lambda inputs, attrs: returned)
    r = only(run(tmp_path, [make_case(op="odd", attrs={})]))
    assert r.status is Status.ERROR
    assert r.reason.startswith("internal error: xs3/odd returned a")


def test_malformed_cases_are_errors_filed_under_their_op(tmp_path, fake_registry):
    result = run(tmp_path, [make_case("a", attrs=[]), "not json", make_case("b")])
    by_op = {(s.backend, s.op): s for s in result.by_op()}
    assert by_op[("xs3", "add")].error == 1 and by_op[("xs3", "add")].passed == 1
    assert by_op[("?", "?")].error == 1
    assert result.exit_code == 1


def test_counts_per_op_and_exit_code(tmp_path, fake_registry):
    bad = make_case("bad")
    bad["expected"]["SAT"] = 5
    result = run(
        tmp_path,
        [make_case("ok1"), bad, make_case("ok2"), make_case("u", attrs={"q": 1})],
    )
    (summary,) = result.by_op()
    assert (summary.passed, summary.failed, summary.error, summary.unsupported) == (2, 1, 0, 1)
    assert summary.total == 4
    assert result.exit_code == 1


def test_no_cases_is_not_a_pass(tmp_path, fake_registry):
    result = run(tmp_path, [""])
    assert result.results == () and result.exit_code == 1


def test_a_lookup_that_fails_is_an_error_looked_up_once(tmp_path, fake_registry, monkeypatch):
    calls = []
    real_lookup = fake_registry.lookup

    def lookup(backend, op):
        calls.append((backend, op))
        if backend == "nnie":
            import quantemu.backends.no_such_backend_for_tests  # noqa: F401
        return real_lookup(backend, op)

    monkeypatch.setattr(fake_registry, "lookup", lookup)
    lines = [make_case(f"n/{i}", backend="nnie", op="log_quantize") for i in range(3)]
    result = run(tmp_path, [*lines, make_case("ok")])
    broken = result.results[:3]
    assert all(r.status is Status.ERROR for r in broken)
    assert broken[0].reason.startswith("internal error: ModuleNotFoundError: No module named")
    assert "Traceback" in broken[0].traceback
    assert result.results[3].status is Status.PASSED
    assert calls.count(("nnie", "log_quantize")) == 1
