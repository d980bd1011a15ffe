"""The bad-input catalog (issue 16): every mistake a user can make that quantemu must refuse
clearly. ``tests/test_bad_input_catalog.py`` checks each case; ``python -m tests.catalog``
writes ``docs/errors.md`` from the same table."""

from __future__ import annotations

from tests.catalog import api, cli_cases, scale, targets
from tests.catalog.support import Bad

CASES: tuple[Bad, ...] = (*api.CASES, *targets.CASES, *cli_cases.CASES, *scale.CASES)
