"""The header of every JSON document quantemu writes (ranges, evaluations): its format and
version, written first and checked before anything else is read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quantemu.errors import InvalidInputError


def header(format_name: str, version: int) -> dict[str, Any]:
    """The first two fields of a document of ``format_name``."""
    return {"format": format_name, "version": version}


def check_header(document: Any, format_name: str, version: int, what: str) -> None:
    """An :class:`InvalidInputError` unless ``document`` is a ``format_name`` document of
    ``version`` (``what``: the kind of document, for the message).

    >>> check_header({"format": "quantemu-ranges", "version": 1}, "quantemu-ranges", 1, "ranges")
    >>> check_header({"format": "x"}, "quantemu-ranges", 1, "ranges")
    Traceback (most recent call last):
    ...
    quantemu.errors.InvalidInputError: not a quantemu ranges document (format != 'quantemu-ranges')
    """
    if not isinstance(document, Mapping) or document.get("format") != format_name:
        raise InvalidInputError(f"not a quantemu {what} document (format != {format_name!r})")
    if document.get("version") != version:
        raise InvalidInputError(
            f"{what} document version {document.get('version')!r}; this quantemu reads "
            f"version {version}"
        )
