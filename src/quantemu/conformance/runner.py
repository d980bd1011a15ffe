"""Running conformance cases against the registered operators (``FORMAT.md`` steps 2 and 3).

Every case ends in exactly one :class:`Status`. Nothing is skipped silently and nothing that did
not run counts as passed: a pair the registry does not have, an attribute the operator does not
declare, or an operator that raises :class:`~quantemu.errors.UnsupportedError` is *unsupported*;
a malformed vector, an operator that rejects its inputs, or an operator that crashes is *error*.
A crash is a bug in quantemu, so its type is kept in the reason and its traceback in the result,
and the run goes on with the next case.
"""

from __future__ import annotations

import enum
import functools
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from quantemu.backends import registry
from quantemu.conformance.compare import Mismatch, compare_outputs
from quantemu.conformance.reader import Case, MalformedCase, VectorFile, read_cases
from quantemu.errors import QuantemuError, RegistryError, UnsupportedError

# Reports file a malformed case whose backend or op is illegible under this name.
UNKNOWN = "?"


class Status(enum.Enum):
    """The verdict on one case."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True)
class CaseResult:
    """The verdict on one case, where it came from, and why (for anything but a pass)."""

    status: Status
    file: str
    line: int
    id: str | None
    backend: str
    op: str
    reason: str = ""
    mismatches: tuple[Mismatch, ...] = ()
    traceback: str = ""


def _count(status: Status) -> property:
    return property(lambda self: self.counts.get(status, 0), doc=f"Cases {status.value}.")


@dataclass(frozen=True)
class OpSummary:
    """Counts of verdicts for one ``(backend, op)`` (``counts``: status -> cases)."""

    backend: str
    op: str
    counts: Mapping[Status, int] = field(default_factory=dict)

    passed = _count(Status.PASSED)
    failed = _count(Status.FAILED)
    error = _count(Status.ERROR)
    unsupported = _count(Status.UNSUPPORTED)

    @property
    def total(self) -> int:
        """Number of cases."""
        return sum(self.counts.values())


@dataclass(frozen=True)
class SuiteResult:
    """Every case's verdict, in file and line order, and the files that were read."""

    files: tuple[str, ...]
    results: tuple[CaseResult, ...]

    def by_op(self) -> list[OpSummary]:
        """One summary per ``(backend, op)``, sorted; illegible names (``?``) sort last."""
        counts: Counter[tuple[str, str, Status]] = Counter(
            (r.backend, r.op, r.status) for r in self.results
        )
        keys = sorted({(b, o) for b, o, _ in counts}, key=_op_sort_key)
        return [_summary(b, o, lambda s, b=b, o=o: counts[(b, o, s)]) for b, o in keys]

    def totals(self) -> OpSummary:
        """The counts over every case."""
        counts = Counter(r.status for r in self.results)
        return _summary("total", "", counts.__getitem__)

    @property
    def exit_code(self) -> int:
        """0 when at least one case ran and every case passed, else 1."""
        totals = self.totals()
        return 0 if totals.total and totals.passed == totals.total else 1


def _summary(backend: str, op: str, count: Callable[[Status], int]) -> OpSummary:
    return OpSummary(backend, op, {status: count(status) for status in Status})


def _op_sort_key(key: tuple[str, str]) -> tuple[bool, str, bool, str]:
    backend, op = key
    return (backend == UNKNOWN, backend, op == UNKNOWN, op)


@dataclass(frozen=True)
class Resolution:
    """What looking ``(backend, op)`` up gave: the entry, or the verdict and reason for none."""

    entry: registry.OpEntry | None
    status: Status = Status.UNSUPPORTED
    reason: str = ""
    traceback: str = ""


def resolve(backend: str, op: str) -> Resolution:
    """Look ``(backend, op)`` up; a miss is *unsupported*, any other exception an *error*."""
    try:
        return Resolution(registry.lookup(backend, op))
    except RegistryError as exc:
        return Resolution(None, Status.UNSUPPORTED, str(exc))
    except Exception as exc:  # e.g. a backend package that fails to import: a bug
        return Resolution(None, Status.ERROR, _internal(exc), _format_traceback(exc))


def run_case(case: Case, resolver: Callable[[str, str], Resolution] = resolve) -> CaseResult:
    """Look the case's operator up, call it, and compare its outputs with the expected ones."""
    found = resolver(case.backend, case.op)
    entry = found.entry
    if entry is None:
        return _verdict(case, found.status, found.reason, traceback_text=found.traceback)
    unknown = sorted(set(case.attrs) - entry.attrs)
    if unknown:
        names = ", ".join(map(repr, unknown))
        known = ", ".join(sorted(entry.attrs)) or "none"
        return _verdict(
            case,
            Status.UNSUPPORTED,
            f"{case.backend}/{case.op} does not know attribute{'s' * (len(unknown) > 1)} "
            f"{names} (it knows: {known})",
        )
    try:
        outputs = entry.fn(case.inputs, case.attrs)
    except UnsupportedError as exc:
        return _verdict(case, Status.UNSUPPORTED, str(exc))
    except QuantemuError as exc:
        return _verdict(case, Status.ERROR, str(exc))
    except Exception as exc:  # any other exception is a bug; the run must go on regardless
        return _crash(case, exc)
    if not isinstance(outputs, Mapping):
        return _verdict(
            case,
            Status.ERROR,
            f"internal error: {case.backend}/{case.op} returned a {type(outputs).__name__}, "
            "not a mapping of output names to values",
        )
    try:
        mismatches = compare_outputs(case.expected, outputs)
    except Exception as exc:  # e.g. an output of a type NumPy cannot compare
        return _crash(case, exc)
    if mismatches:
        return _verdict(case, Status.FAILED, "", mismatches)
    return _verdict(case, Status.PASSED)


def _verdict(
    case: Case,
    status: Status,
    reason: str = "",
    mismatches: tuple[Mismatch, ...] = (),
    traceback_text: str = "",
) -> CaseResult:
    return CaseResult(
        status,
        case.file,
        case.line,
        case.id,
        case.backend,
        case.op,
        reason,
        mismatches,
        traceback_text,
    )


def _crash(case: Case, exc: Exception) -> CaseResult:
    return _verdict(case, Status.ERROR, _internal(exc), traceback_text=_format_traceback(exc))


def _internal(exc: Exception) -> str:
    return f"internal error: {type(exc).__name__}: {exc}"


def _format_traceback(exc: Exception) -> str:
    return "".join(traceback.format_exception(exc))


def malformed_result(item: MalformedCase) -> CaseResult:
    """The *error* verdict on a line that is not a valid case."""
    return CaseResult(
        Status.ERROR,
        item.file,
        item.line,
        item.id,
        item.backend or UNKNOWN,
        item.op or UNKNOWN,
        item.reason,
    )


def run_suite(
    files: Sequence[VectorFile],
    on_file: Callable[[int, VectorFile], None] | None = None,
) -> SuiteResult:
    """Read and run every case of ``files``; ``on_file(i, file)`` is called as file i starts."""
    return SuiteResult(
        tuple(vf.display for vf in files),
        tuple(run_items(read_cases(_announce(files, on_file)))),
    )


def run_items(items: Iterable[Case | MalformedCase]) -> Iterable[CaseResult]:
    """The verdict on each item: malformed ones are errors, the others are run.

    Lookups are cached for the run: the registry does not change during it, and a backend that
    fails to import would otherwise retry (and fail) the import for every one of its cases.
    """
    resolver = functools.cache(resolve)
    for item in items:
        if isinstance(item, MalformedCase):
            yield malformed_result(item)
        else:
            yield run_case(item, resolver)


def _announce(
    files: Sequence[VectorFile], on_file: Callable[[int, VectorFile], None] | None
) -> Iterable[VectorFile]:
    for index, vf in enumerate(files):
        if on_file is not None:
            on_file(index, vf)
        yield vf
