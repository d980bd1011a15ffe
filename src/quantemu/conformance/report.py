"""Conformance reports: a plain-text summary for people and a JSON document for machines.

The text report leads with a per-``(backend, op)`` table and a totals row, then lists failures and
errors per op (capped, with the number left out) and unsupported cases grouped by reason, since
"backend not implemented yet" repeated a thousand times would bury everything else. The JSON
report is never capped: it holds every non-passing case with its file, line, id and reason.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from quantemu import __version__
from quantemu.conformance.compare import Mismatch, format_value
from quantemu.conformance.runner import CaseResult, OpSummary, Status, SuiteResult

_COLUMNS = ("backend", "op", "cases", "passed", "failed", "error", "unsupported")


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int]) -> str:
    """An aligned plain-text table; columns in ``numeric`` are right-aligned.

    >>> print(format_table(["a", "n"], [["x", "1"], ["yy", "10"]], {1}))
    a    n
    --  --
    x    1
    yy  10
    """
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        padded = [
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(padded).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def _counts_row(s: OpSummary, backend: str, op: str) -> list[str]:
    counts = (s.total, s.passed, s.failed, s.error, s.unsupported)
    return [backend, op, *map(str, counts)]


def format_text(result: SuiteResult, *, max_listed: int = 10, tracebacks: bool = False) -> str:
    """The human-readable report; at most ``max_listed`` failures and errors are listed per op."""
    ops = result.by_op()
    totals = result.totals()
    rows = [_counts_row(s, s.backend, s.op) for s in ops]
    rows.append(_counts_row(totals, "total", f"{len(ops)} ops"))
    parts = [format_table(_COLUMNS, rows, numeric={2, 3, 4, 5, 6})]
    failures = _listing(result, Status.FAILED, max_listed, tracebacks)
    if failures:
        parts.append("Failures\n" + failures)
    errors = _listing(result, Status.ERROR, max_listed, tracebacks)
    if errors:
        parts.append("Errors\n" + errors)
    unsupported = _unsupported(result)
    if unsupported:
        parts.append("Unsupported (cases per reason)\n" + unsupported)
    parts.append(_verdict_line(result, totals))
    return "\n\n".join(parts) + "\n"


def _verdict_line(result: SuiteResult, t: OpSummary) -> str:
    verdict = "PASS" if result.exit_code == 0 else "FAIL"
    if not t.total:
        verdict += " (no cases ran)"
    return (
        f"{verdict}: {t.total} cases in {len(result.files)} files: {t.passed} passed, "
        f"{t.failed} failed, {t.error} errors, {t.unsupported} unsupported"
    )


def _listing(result: SuiteResult, status: Status, max_listed: int, tracebacks: bool) -> str:
    groups: dict[tuple[str, str], list[CaseResult]] = defaultdict(list)
    for r in result.results:
        if r.status is status:
            groups[(r.backend, r.op)].append(r)
    noun = "failed case" if status is Status.FAILED else "error"
    lines = []
    for s in result.by_op():
        cases = groups.get((s.backend, s.op))
        if not cases:
            continue
        lines.append(f"  {s.backend}/{s.op}: {_plural(len(cases), noun)}")
        for r in cases[:max_listed]:
            lines.extend(_failure_lines(r) if status is Status.FAILED else _error_lines(r))
            if tracebacks and r.traceback:
                lines.extend("      " + t for t in r.traceback.rstrip().splitlines())
        if len(cases) > max_listed:
            more = len(cases) - max_listed
            lines.append(
                f"    ... {more} more {_noun(more, noun)} not listed (--max-failures {max_listed})"
            )
    return "\n".join(lines)


def _noun(count: int, noun: str) -> str:
    return noun if count == 1 else noun + "s"


def _plural(count: int, noun: str) -> str:
    return f"{count} {_noun(count, noun)}"


def _failure_lines(r: CaseResult) -> list[str]:
    return [f"    {r.id}  {describe_mismatch(m)}  ({r.file}:{r.line})" for m in r.mismatches]


def _error_lines(r: CaseResult) -> list[str]:
    label = f" [{r.id}]" if r.id else ""
    return [f"    {r.file}:{r.line}{label}: {r.reason}"]


def describe_mismatch(m: Mismatch) -> str:
    """One line: output, first differing index, expected vs actual, and how many differ.

    >>> print(describe_mismatch(Mismatch("Y", "1 of 6 elements differ", 4, (1, 1), 3, 4, 1, 6,
    ...                                  "int8")))
    Y[1, 1] (flat 4): expected 3, actual 4; 1 of 6 elements differ
    """
    if m.index is not None:
        where = f"[{', '.join(map(str, m.nd_index or ()))}] (flat {m.index})"
        values = (
            f"expected {format_value(m.expected, m.dtype)}, "
            f"actual {format_value(m.actual, m.dtype)}"
        )
        return f"{m.output}{where}: {values}; {m.reason}"
    if m.expected is not None:
        return f"{m.output}: expected {m.expected}, actual {m.actual} ({m.reason})"
    return f"{m.output}: {m.reason}"


def _unsupported(result: SuiteResult) -> str:
    reasons = Counter(r.reason for r in result.results if r.status is Status.UNSUPPORTED)
    if not reasons:
        return ""
    width = len(str(max(reasons.values())))
    return "\n".join(
        f"  {count:>{width}}  {reason}"
        for reason, count in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
    )


def to_json(result: SuiteResult, *, paths: Sequence[str] = ()) -> dict[str, Any]:
    """The machine-readable report: summary per op and every non-passing case, uncapped.

    Float values use the vector format's convention: non-finite numbers are the strings
    ``"nan"``, ``"inf"``, ``"-inf"``, so the document is strict JSON.
    """
    totals = result.totals()
    return {
        "quantemu_version": __version__,
        "paths": list(paths),
        "files": list(result.files),
        "exit_code": result.exit_code,
        "totals": _summary_json(totals, with_names=False),
        "ops": [_summary_json(s) for s in result.by_op()],
        "failures": [_case_json(r) for r in result.results if r.status is Status.FAILED],
        "errors": [_case_json(r) for r in result.results if r.status is Status.ERROR],
        "unsupported": [_case_json(r) for r in result.results if r.status is Status.UNSUPPORTED],
    }


def _summary_json(s: OpSummary, *, with_names: bool = True) -> dict[str, Any]:
    names = {"backend": s.backend, "op": s.op} if with_names else {}
    return {
        **names,
        "cases": s.total,
        "passed": s.passed,
        "failed": s.failed,
        "error": s.error,
        "unsupported": s.unsupported,
    }


def _case_json(r: CaseResult) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "file": r.file,
        "line": r.line,
        "id": r.id,
        "backend": r.backend,
        "op": r.op,
        "status": r.status.value,
        "reason": r.reason or "; ".join(f"{m.output}: {m.reason}" for m in r.mismatches),
    }
    if r.mismatches:
        entry["mismatches"] = [_mismatch_json(m) for m in r.mismatches]
    if r.traceback:
        entry["traceback"] = r.traceback
    return entry


def _mismatch_json(m: Mismatch) -> dict[str, Any]:
    return {
        "output": m.output,
        "reason": m.reason,
        "index": m.index,
        "nd_index": list(m.nd_index) if m.nd_index is not None else None,
        "expected": _json_number(m.expected),
        "actual": _json_number(m.actual),
        "count": m.count,
        "size": m.size,
        "dtype": m.dtype or None,
    }


def _json_number(value: int | float | None) -> int | float | str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value
