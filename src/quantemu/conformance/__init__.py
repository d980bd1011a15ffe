"""Conformance: hold the emulation to vectors produced by real implementations.

A vector file (``conformance/FORMAT.md``) holds one operator call per line with its inputs,
attributes and the exact outputs a trusted implementation produced. :func:`read_cases` parses
files into :class:`Case` values (or :class:`MalformedCase` for lines that break the format),
:func:`run_suite` runs them against the registered operators, and :mod:`.report` prints the
verdicts. ``quantemu conformance`` (:mod:`quantemu.cli.conformance`) puts the pieces together;
the public suite ships in ``vectors/`` and :func:`bundled_files` finds it.
"""

from quantemu.conformance.compare import Mismatch, compare_output, compare_outputs
from quantemu.conformance.reader import (
    Case,
    MalformedCase,
    SuiteError,
    VectorFile,
    collect_files,
    read_cases,
    read_file,
)
from quantemu.conformance.report import format_text, to_json
from quantemu.conformance.runner import (
    CaseResult,
    OpSummary,
    Status,
    SuiteResult,
    run_case,
    run_suite,
)
from quantemu.conformance.suite import bundled_files
from quantemu.conformance.tensors import CaseFormatError, decode_tensor

__all__ = [
    "Case",
    "CaseFormatError",
    "CaseResult",
    "MalformedCase",
    "Mismatch",
    "OpSummary",
    "Status",
    "SuiteError",
    "SuiteResult",
    "VectorFile",
    "bundled_files",
    "collect_files",
    "compare_output",
    "compare_outputs",
    "decode_tensor",
    "format_text",
    "read_cases",
    "read_file",
    "run_case",
    "run_suite",
    "to_json",
]
