"""``quantemu conformance``: exit codes, the text and JSON reports, and the bundled suite."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conformance_helpers import make_case, write_vectors

from quantemu import __version__
from quantemu.backends import registry
from quantemu.cli import main
from quantemu.conformance import read_cases
from quantemu.conformance.suite import bundled_files


def failing_case(case_id):
    case = make_case(case_id)
    case["expected"]["Y"]["data"][0] = 100
    return case


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"quantemu {__version__}"


def test_all_passing_exits_0(tmp_path, fake_registry, capsys):
    path = write_vectors(tmp_path / "v.jsonl", [make_case("a"), make_case("b")])
    assert main(["conformance", str(path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^xs3\s+add\s+2\s+2\s+0\s+0\s+0$", out, re.MULTILINE)
    assert "PASS: 2 cases in 1 files" in out


def test_failure_exits_1_and_is_listed(tmp_path, fake_registry, capsys):
    path = write_vectors(tmp_path / "v.jsonl", [make_case("a"), failing_case("bad")])
    assert main(["conformance", str(path)]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^xs3\s+add\s+2\s+1\s+1\s+0\s+0$", out, re.MULTILINE)
    line = next(x for x in out.splitlines() if x.strip().startswith("bad "))
    assert "Y[0, 0] (flat 0): expected 100, actual 2; 1 of 6 elements differ" in line
    assert f"({path}:2)" in line


def test_errors_are_listed_with_file_and_line(tmp_path, fake_registry, capsys):
    path = write_vectors(tmp_path / "v.jsonl", [make_case("a"), '{"id": 1', make_case("b")])
    assert main(["conformance", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}:2: invalid JSON:" in out
    assert re.search(r"^\?\s+\?\s+1\s+0\s+0\s+1\s+0$", out, re.MULTILINE)


def test_listing_is_capped_with_a_count_of_what_is_left_out(tmp_path, fake_registry, capsys):
    lines = [failing_case(f"bad/{i}") for i in range(5)] + [
        make_case(f"e/{i}", attrs=[]) for i in range(4)
    ]
    path = write_vectors(tmp_path / "v.jsonl", lines)
    assert main(["conformance", "--max-failures", "2", str(path)]) == 1
    out = capsys.readouterr().out
    assert "bad/0 " in out and "bad/1 " in out and "bad/2 " not in out
    assert "... 3 more failed cases not listed (--max-failures 2)" in out
    assert "... 2 more errors not listed (--max-failures 2)" in out


def test_unsupported_reasons_are_grouped(tmp_path, fake_registry, capsys):
    lines = [make_case(f"n/{i}", backend="nnie", op="log_quantize") for i in range(7)]
    path = write_vectors(tmp_path / "v.jsonl", lines)
    assert main(["conformance", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.count("unknown backend 'nnie'") == 1
    assert re.search(r"^\s+7  unknown backend 'nnie'", out, re.MULTILINE)


def test_tracebacks_only_on_request(tmp_path, fake_registry, capsys):
    fake_registry.register("xs3", "buggy")(lambda inputs, attrs: {"Y": 1 // 0})
    path = write_vectors(tmp_path / "v.jsonl", [make_case(op="buggy", attrs={})])
    assert main(["conformance", str(path)]) == 1
    out = capsys.readouterr().out
    assert "internal error: ZeroDivisionError" in out and "Traceback" not in out
    assert main(["conformance", "--traceback", str(path)]) == 1
    out = capsys.readouterr().out
    assert "Traceback (most recent call last)" in out and "1 // 0" in out


def test_json_to_stdout_is_pure_json_matching_the_counts(tmp_path, fake_registry, capsys):
    lines = [make_case("a"), failing_case("bad"), "[]", make_case("u", backend="nvdla", op="cdp")]
    path = write_vectors(tmp_path / "v.jsonl", lines)
    assert main(["conformance", "--json", "-", str(path)]) == 1
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert "backend" in captured.err  # the text report went to stderr
    assert doc["exit_code"] == 1 and doc["paths"] == [str(path)]
    assert doc["totals"] == {"cases": 4, "passed": 1, "failed": 1, "error": 1, "unsupported": 1}
    ops = {(o["backend"], o["op"]): o for o in doc["ops"]}
    assert ops[("xs3", "add")]["passed"] == 1 and ops[("nvdla", "cdp")]["unsupported"] == 1
    (failure,) = doc["failures"]
    assert (failure["id"], failure["line"], failure["file"]) == ("bad", 2, str(path))
    mismatch = failure["mismatches"][0]
    assert (mismatch["index"], mismatch["expected"], mismatch["actual"]) == (0, 100, 2)
    assert doc["errors"][0]["line"] == 3 and "JSON object" in doc["errors"][0]["reason"]
    assert doc["unsupported"][0]["reason"].startswith("unknown backend 'nvdla'")


def test_json_to_a_file_keeps_the_text_report_on_stdout(tmp_path, fake_registry, capsys):
    path = write_vectors(tmp_path / "v.jsonl", [make_case()])
    report = tmp_path / "report.json"
    assert main(["conformance", "--json", str(report), str(path)]) == 0
    assert "PASS" in capsys.readouterr().out
    assert json.loads(report.read_text())["totals"]["passed"] == 1


def test_json_non_finite_floats_stay_strict_json(tmp_path, fake_registry, capsys):
    fake_registry.register("xs3", "inf")(lambda inputs, attrs: {"y": inputs["x"] * 0})
    case = make_case(
        op="inf",
        attrs={},
        inputs={"x": {"dtype": "float32", "shape": [1], "data": [1.0]}},
        expected={"y": {"dtype": "float32", "shape": [1], "data": ["-inf"]}},
    )
    path = write_vectors(tmp_path / "v.jsonl", [case])
    assert main(["conformance", "--json", "-", str(path)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["failures"][0]["mismatches"][0]["expected"] == "-inf"


@pytest.mark.parametrize(
    ("make_path", "message"),
    [
        (lambda p: p / "nope", "does not exist"),
        (lambda p: p, "contains no .jsonl or .jsonl.gz vector files"),
        (lambda p: (p / "a.md").write_text("x") and p / "a.md", "is not a .jsonl or .jsonl.gz"),
    ],
    ids=["missing", "no-vectors", "not-a-vector-file"],
)
def test_usage_errors_exit_2_naming_the_path(tmp_path, capsys, make_path, message):
    path = make_path(tmp_path)
    assert main(["conformance", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err


def test_bad_max_failures_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["conformance", "--max-failures", "-1"])
    assert exc.value.code == 2


def test_bare_command_runs_the_bundled_suite(capsys):
    # Isolated: every case is unsupported whichever backends are implemented by now.
    with registry.isolated():
        assert main(["conformance"]) == 1
    out = capsys.readouterr().out
    files = bundled_files()
    assert len(files) >= 21
    # Folder = backend and file = operator, except for extensions such as nvdla-fp16/sdp_fp16
    # (backend nvdla, op sdp), whose cases count in their operator's row.
    ops = {
        (Path(vf.display).parts[-2].split("-")[0], c.op) for vf in files for c in read_cases([vf])
    }
    for backend, op in ops:
        row = re.search(rf"^{backend}\s+{op}\s+(\d+)\s+0\s+0\s+0\s+(\d+)$", out, re.MULTILINE)
        assert row, f"no all-unsupported row for {backend}/{op}"
        assert row.group(1) == row.group(2) != "0"
    assert f"in {len(files)} files: 0 passed, 0 failed, 0 errors" in out
    assert "<bundled>/" not in out  # nothing is malformed, so no file is named


def test_module_entry_point_end_to_end(tmp_path):
    # The real process: with --json -, stdout is one JSON document; a missing path exits 2.
    src = Path(__file__).resolve().parents[2] / "src"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "quantemu", "conformance"]
    done = subprocess.run([*command, "--json", "-"], capture_output=True, env=env, check=False)
    doc = json.loads(done.stdout)
    assert done.returncode == doc["exit_code"]
    assert doc["totals"]["cases"] == sum(o["cases"] for o in doc["ops"]) > 1000
    missing = subprocess.run(
        [*command, str(tmp_path / "x")], capture_output=True, text=True, env=env, check=False
    )
    assert missing.returncode == 2 and "does not exist" in missing.stderr
