"""Exception types shared across quantemu.

Every user-facing check raises one of these (never ``assert``), with a message that names the
offending values, where they came from, and what to do instead (DESIGN principle 7).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, TypeVar

E = TypeVar("E", bound=enum.Enum)


class QuantemuError(Exception):
    """Base class of every error quantemu raises on purpose."""


class InvalidInputError(QuantemuError, ValueError):
    """An argument has the wrong dtype, shape, range or value."""


class UnsupportedError(QuantemuError, NotImplementedError):
    """A request quantemu understands but does not (or cannot faithfully) emulate."""


class RegistryError(QuantemuError, LookupError):
    """A ``(backend, op)`` pair that nothing is registered for."""


def choose(cls: type[E], value: Any, what: str, meanings: Mapping[str, str]) -> E:
    """The member of enum ``cls`` that ``value`` is or whose value it is; else an
    :class:`InvalidInputError` naming ``what`` and each choice with its meaning (``meanings``:
    value -> what choosing it means).

    >>> import enum
    >>> class Mode(enum.Enum):
    ...     FAST = "fast"
    ...     EXACT = "exact"
    >>> choose(Mode, "exact", "mode", {}) is Mode.EXACT
    True
    >>> choose(Mode, "slow", "mode", {})
    Traceback (most recent call last):
    ...
    quantemu.errors.InvalidInputError: mode = 'slow'; choose 'fast' or 'exact'
    >>> choose(Mode, "slow", "mode", {"fast": "quick", "exact": "bit-exact"})
    Traceback (most recent call last):
    ...
    quantemu.errors.InvalidInputError: mode = 'slow'; choose 'fast' (quick) or 'exact' (bit-exact)
    """
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        texts = [
            f"{m.value!r} ({meanings[m.value]})" if m.value in meanings else repr(m.value)
            for m in cls
        ]
        listed = texts[0] if len(texts) == 1 else f"{', '.join(texts[:-1])} or {texts[-1]}"
        raise InvalidInputError(f"{what} = {value!r}; choose {listed}") from None
