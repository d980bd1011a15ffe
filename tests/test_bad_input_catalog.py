"""The bad-input catalog (issue 16): every case raises its exception, with the key words of its
message (the offending value, the remedy), and docs/errors.md lists exactly these cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.catalog import CASES
from tests.catalog.__main__ import render
from tests.catalog.support import Bad, CliRefused

DOC = Path(__file__).resolve().parents[1] / "docs" / "errors.md"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Bad) -> None:
    with pytest.raises(case.error) as info:
        case.call()
    message = str(info.value)
    missing = [w for w in case.words if w not in message]
    assert not missing, f"{case.id}: {missing} not in: {message}"
    assert "Traceback" not in message
    if case.exit_code is not None:
        assert isinstance(info.value, CliRefused)
        assert info.value.code == case.exit_code, message


def test_the_catalog_is_large_and_ids_are_unique() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) >= 80
    assert len(set(ids)) == len(ids)


def test_docs_list_every_case() -> None:
    assert DOC.read_text() == render(), "regenerate: python -m tests.catalog > docs/errors.md"
