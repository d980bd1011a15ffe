"""Fixtures for the conformance tests.

Fake operators are registered on a real backend name (``xs3``) inside
:func:`quantemu.backends.registry.isolated`, so they never leak into other tests and the tests do
not depend on which real backends are implemented.
"""

from __future__ import annotations

import pytest
from conformance_helpers import fake_add

from quantemu.backends import registry


@pytest.fixture
def fake_registry():
    """An isolated registry that holds ``xs3/add`` (attrs ``k``); yields the registry module."""
    with registry.isolated():
        registry.register("xs3", "add", attrs={"k"})(fake_add)
        yield registry
