"""Reading vector files: every malformed line is an error at its file:line, and reading goes on."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from conformance_helpers import GOOD_CASE, make_case, tensor, write_vectors

from quantemu.conformance.reader import (
    Case,
    MalformedCase,
    SuiteError,
    collect_files,
    read_cases,
)


def read_all(*paths):
    return list(read_cases(collect_files(paths)))


def _without(key):
    case = make_case()
    del case[key]
    return case


def _with_input(name, value):
    return make_case(inputs={"X": GOOD_CASE["inputs"]["X"], name: value})


# (line, reason substring). Each line is written between two good cases (see below).
MALFORMED_LINES = [
    ('{"id": "a", "backend": ', "invalid JSON: Expecting value (column 24)"),
    ('{"id": "a"} trailing', "invalid JSON: Extra data"),
    ("[1, 2]", "a case must be a JSON object, got array"),
    ('"just a string"', "a case must be a JSON object, got string"),
    (_without("id"), "missing key 'id'"),
    (_without("backend"), "missing key 'backend'"),
    (_without("op"), "missing key 'op'"),
    (_without("attrs"), "missing key 'attrs'"),
    (_without("inputs"), "missing key 'inputs'"),
    (_without("expected"), "missing key 'expected'"),
    (make_case(id=5), "'id' must be a string, got integer"),
    (make_case(id=""), "'id' must not be empty"),
    (make_case(backend=None), "'backend' must be a string, got null"),
    (make_case(op=["add"]), "'op' must be a string, got array"),
    (make_case(attrs=[]), "'attrs' must be an object, got array"),
    (make_case(inputs="X"), "'inputs' must be an object, got string"),
    (make_case(expected=[1]), "'expected' must be an object, got array"),
    (make_case(expected={}), "'expected' is empty"),
    (make_case(source=1), "'source' must be a string, got integer"),
    (make_case(note=None), "'note' must be a string, got null"),
    (make_case(extra=1), "unknown key 'extra'"),
    (_with_input("W", tensor("int3", [1], [0])), "inputs.W: unknown dtype 'int3'"),
    (_with_input("W", tensor("int8", [2, -1], [])), "inputs.W: shape must be a list of non-neg"),
    (_with_input("W", tensor("int8", [3], [1, 2])), "inputs.W: data has 2 elements but shape"),
    (_with_input("W", tensor("int8", [1], [300])), "inputs.W: element 0 = 300 is out of range"),
    (_with_input("W", tensor("int8", [1], [1.5])), "inputs.W: element 0 is the number 1.5"),
    (_with_input("W", tensor("float32", [1], ["Inf"])), "inputs.W: element 0 is the string 'Inf'"),
    (_with_input("W", tensor("float16", [1], [1.0], bits=True)), "(float16 bit patterns)"),
    (
        make_case(expected={"Y": tensor("uint8", [1], [-1])}),
        "expected.Y: element 0 = -1 is out of range for uint8",
    ),
    (make_case(expected={"SAT": True}), "expected.SAT: must be a tensor object or an integer"),
    (make_case(expected={"SAT": 2.0}), "expected.SAT: must be a tensor object or an integer"),
    (
        json.dumps(make_case()).replace('"op": "add"', '"op": "add", "op": "sub"'),
        "invalid JSON: duplicate key 'op'",
    ),
    (
        json.dumps(make_case()).replace("[2, -1, 4", "[NaN, -1, 4"),
        "NaN is not JSON",
    ),
    (b'{"id": "\xff\xfe"}', "invalid UTF-8 at byte 8"),
    ("[" * 100_000 + "]" * 100_000, "invalid JSON"),
]


@pytest.mark.parametrize("compressed", [False, True], ids=["jsonl", "jsonl.gz"])
def test_each_malformed_line_is_an_error_at_its_line_and_reading_goes_on(tmp_path, compressed):
    lines, expected_errors = [make_case("good/0")], {}
    for n, (line, reason) in enumerate(MALFORMED_LINES, start=1):
        lines.append(line)
        expected_errors[2 * n] = reason  # line numbers are 1-based; bad lines are even
        lines.append(make_case(f"good/{n}"))
    name = "v.jsonl.gz" if compressed else "v.jsonl"
    path = write_vectors(tmp_path / name, lines)

    items = read_all(path)

    errors = {i.line: i for i in items if isinstance(i, MalformedCase)}
    good = [i for i in items if isinstance(i, Case)]
    assert sorted(errors) == sorted(expected_errors)
    for line, reason in expected_errors.items():
        assert errors[line].file == str(path)
        assert reason in errors[line].reason, (line, errors[line].reason)
    assert [c.id for c in good] == [f"good/{n}" for n in range(len(MALFORMED_LINES) + 1)]
    assert [c.line for c in good] == list(range(1, 2 * len(MALFORMED_LINES) + 2, 2))


def test_malformed_case_keeps_its_legible_names(tmp_path):
    (item,) = read_all(write_vectors(tmp_path / "v.jsonl", [make_case(attrs=[])]))
    assert isinstance(item, MalformedCase)
    assert (item.id, item.backend, item.op) == ("xs3/add/000000", "xs3", "add")


def test_good_case_decodes_inputs_expected_and_counters(tmp_path):
    (case,) = read_all(write_vectors(tmp_path / "v.jsonl", [GOOD_CASE]))
    assert isinstance(case, Case)
    assert (case.id, case.backend, case.op, case.line) == ("xs3/add/000000", "xs3", "add", 1)
    assert case.attrs == {"k": 1}
    assert case.inputs["X"].dtype == np.int16 and case.inputs["X"].shape == (2, 3)
    assert case.expected["Y"].tolist() == [[2, -1, 4], [5, 6, 7]]
    assert case.expected["SAT"] == 1 and type(case.expected["SAT"]) is int
    assert case.source.startswith("hand-computed")


def test_plain_and_gzip_files_read_the_same(tmp_path):
    lines = [make_case(f"c/{i}") for i in range(3)]
    plain = read_all(write_vectors(tmp_path / "a.jsonl", lines))
    packed = read_all(write_vectors(tmp_path / "b.jsonl.gz", lines))
    assert [(c.id, c.line) for c in plain] == [(c.id, c.line) for c in packed]
    for a, b in zip(plain, packed, strict=True):
        assert a.inputs["X"].tobytes() == b.inputs["X"].tobytes()


def test_blank_lines_are_skipped_but_counted(tmp_path):
    path = write_vectors(tmp_path / "v.jsonl", ["", "   ", make_case("a"), "\t", make_case("b")])
    assert [(c.id, c.line) for c in read_all(path)] == [("a", 3), ("b", 5)]


def test_crlf_line_endings(tmp_path):
    path = tmp_path / "v.jsonl"
    path.write_bytes(json.dumps(make_case("a")).encode() + b"\r\n\r\n")
    assert [c.id for c in read_all(path)] == ["a"]


def test_truncated_gzip_reports_and_stops_that_file_only(tmp_path):
    data = "\n".join(json.dumps(make_case(f"t/{i}")) for i in range(50)).encode() + b"\n"
    packed = gzip.compress(data, mtime=0)
    bad = tmp_path / "a_truncated.jsonl.gz"
    bad.write_bytes(packed[: len(packed) // 2])
    write_vectors(tmp_path / "b_next.jsonl", [make_case("next/0")])

    items = read_all(tmp_path)

    errors = [i for i in items if isinstance(i, MalformedCase)]
    assert errors, "a truncated stream must be reported"
    assert errors[-1].file.endswith("a_truncated.jsonl.gz")
    assert "cannot read gzip stream" in errors[-1].reason
    assert "rest of the file is skipped" in errors[-1].reason
    # Reading went on with the next file.
    assert items[-1].id == "next/0" and isinstance(items[-1], Case)


def test_not_a_gzip_file_is_an_error_at_line_1(tmp_path):
    path = tmp_path / "fake.jsonl.gz"
    path.write_bytes(json.dumps(make_case()).encode())
    (item,) = read_all(path)
    assert isinstance(item, MalformedCase)
    assert item.line == 1 and "cannot read gzip stream" in item.reason


def test_duplicate_ids_are_errors_naming_the_first(tmp_path):
    write_vectors(tmp_path / "a.jsonl", [make_case("dup"), make_case("other")])
    write_vectors(tmp_path / "b.jsonl", [make_case("dup")])
    items = read_all(tmp_path)
    assert [type(i).__name__ for i in items] == ["Case", "Case", "MalformedCase"]
    assert items[2].line == 1 and items[2].file.endswith("b.jsonl")
    assert f"duplicate id 'dup' (first used at {tmp_path / 'a.jsonl'}:1)" in items[2].reason


def test_directory_is_searched_recursively_sorted_and_ignores_other_files(tmp_path):
    write_vectors(tmp_path / "b" / "z.jsonl", [make_case("bz")])
    write_vectors(tmp_path / "a" / "y.jsonl.gz", [make_case("ay")])
    write_vectors(tmp_path / "a" / "deeper" / "x.jsonl", [make_case("adx")])
    (tmp_path / "README.md").write_text("# not vectors")
    (tmp_path / "a" / "notes.json").write_text("{}")
    files = collect_files([tmp_path])
    assert [f.display for f in files] == [
        str(tmp_path / "a/deeper/x.jsonl"),
        str(tmp_path / "a/y.jsonl.gz"),
        str(tmp_path / "b/z.jsonl"),
    ]


def test_a_file_named_twice_is_read_once(tmp_path):
    path = write_vectors(tmp_path / "v.jsonl", [make_case()])
    assert len(collect_files([tmp_path, path])) == 1


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: p / "missing", "does not exist"),
        (lambda p: p, "contains no .jsonl or .jsonl.gz vector files"),
        (lambda p: (p / "x.md").write_text("x") and p, "contains no .jsonl"),
        (lambda p: (p / "x.md").write_text("x") and p / "x.md", "is not a .jsonl or .jsonl.gz"),
    ],
    ids=["missing", "empty-dir", "dir-without-vectors", "not-a-vector-file"],
)
def test_bad_paths_are_suite_errors_naming_the_path(tmp_path, setup, message):
    path = setup(tmp_path)
    with pytest.raises(SuiteError) as exc:
        collect_files([path])
    assert message in str(exc.value)
    assert str(path) in str(exc.value)
