"""Exception types shared across quantemu.

Every user-facing check raises one of these (never ``assert``), with a message that names the
offending values, where they came from, and what to do instead (DESIGN principle 7).
"""

from __future__ import annotations


class QuantemuError(Exception):
    """Base class of every error quantemu raises on purpose."""


class InvalidInputError(QuantemuError, ValueError):
    """An argument has the wrong dtype, shape, range or value."""


class UnsupportedError(QuantemuError, NotImplementedError):
    """A request quantemu understands but does not (or cannot faithfully) emulate."""


class RegistryError(QuantemuError, LookupError):
    """A ``(backend, op)`` pair that nothing is registered for."""
