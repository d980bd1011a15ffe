"""Fixtures for the simulation front end and command tests.

``fake_backends`` replaces every backend's lowering with :mod:`fake_lowering` (float layers,
int8 outputs), so these tests do not depend on which real lowerings exist. (The report tests
and their evaluations are in ``tests/report``.)
"""

from __future__ import annotations

import pytest
from fake_lowering import install_fake_backends


@pytest.fixture
def fake_backends(monkeypatch):
    """Every backend lowers through the fake lowering for the test's duration."""
    install_fake_backends(monkeypatch)
