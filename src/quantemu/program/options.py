"""Typed lowering options: one base every backend's options derive from.

A backend declares its options as a frozen dataclass that derives from :class:`LoweringOptions`,
one field per result-changing choice, each with its type and default. :meth:`from_mapping`
builds it from keyword options (``quantemu.compile(..., isa="avx2")``) or from the CLI's
``--option KEY=VALUE`` text alike:

- an unknown key is an error that lists the backend's options and, for enum fields, their
  values;
- values are typed by the field, not guessed from the text: an enum field takes a member or
  its value (``"avx2"``), a bool field ``True``/``False`` or ``true``/``false``/``1``/``0``/
  ``yes``/``no``, an int field an int or its decimal text, a float field a number or its text;
  fields of other types (mappings, ``Any``) get the value as given.

A backend's ``__post_init__`` still validates what the types cannot say (ranges, combinations).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from quantemu.errors import InvalidInputError

T = TypeVar("T", bound="LoweringOptions")

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


@dataclasses.dataclass(frozen=True)
class LoweringOptions:
    """Base of every backend's lowering options (see the module docstring)."""

    #: The backend's name, for messages (``xs3``, ``nvdla``, ...).
    backend: ClassVar[str] = ""

    @classmethod
    def from_mapping(cls: type[T], options: Mapping[str, Any] | None = None) -> T:
        """The options from ``options`` (name -> value or text); see the module docstring."""
        options = dict(options or {})
        known = {f.name: f for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise InvalidInputError(
                f"{cls.backend or cls.__name__}: unknown option(s) "
                f"{', '.join(map(repr, unknown))}; the options are {cls.choices_text()}"
            )
        hints = typing.get_type_hints(cls)
        typed = {k: _coerce(cls, k, hints.get(k, Any), v) for k, v in options.items()}
        return cls(**typed)

    @classmethod
    def checked(cls: type[T], options: Any) -> T:
        """``options`` itself, which a backend's ``lower()`` requires to be typed already (a
        run's plan types them once), or the defaults for ``None``; anything else (a mapping,
        text) is an error saying how to type it."""
        if options is None:
            return cls()
        if not isinstance(options, cls):
            raise InvalidInputError(
                f"{cls.backend or cls.__name__} lower() takes typed options, got "
                f"{type(options).__name__}; pass {cls.__module__}.{cls.__name__}.from_mapping"
                "({...}) (quantemu.compile types keyword options itself)"
            )
        return options

    @classmethod
    def typed_value(cls, name: str, value: Any) -> Any:
        """``value`` of option ``name`` typed as :meth:`from_mapping` types it (to compare two
        values given for one option); ``value`` as it is for a name that is not an option."""
        if name not in cls.field_names():
            return value
        return _coerce(cls, name, typing.get_type_hints(cls).get(name, Any), value)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The option names, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.init)

    @classmethod
    def choices_text(cls) -> str:
        """``isa (avx2|avx512_core|...), reduce_range (bool), ...`` for messages and help."""
        hints = typing.get_type_hints(cls)
        return ", ".join(f"{n} ({_type_text(hints.get(n, Any))})" for n in cls.field_names())

    def describe(self) -> dict[str, str]:
        """Every option's value as text (enum members by value), for report headers."""
        return {n: _value_text(getattr(self, n)) for n in self.field_names()}


def _enum_type(hint: Any) -> type[enum.Enum] | None:
    """The enum class of ``hint`` (``Isa`` or ``Isa | None``), else None."""
    candidates = typing.get_args(hint) if _is_union(hint) else (hint,)
    for c in candidates:
        if isinstance(c, type) and issubclass(c, enum.Enum):
            return c
    return None


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _coerce(cls: type, name: str, hint: Any, value: Any) -> Any:
    where = f"{cls.backend or cls.__name__} option {name}"
    enum_cls = _enum_type(hint)
    if enum_cls is not None:
        return _coerce_enum(enum_cls, value, where)
    if hint is bool:
        return _coerce_bool(value, where)
    if hint is int and isinstance(value, str):
        try:
            return int(value.strip(), 10)
        except ValueError:
            raise InvalidInputError(f"{where} = {value!r}: expected an integer") from None
    if hint is float and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise InvalidInputError(f"{where} = {value!r}: expected a number") from None
    return value


def _coerce_enum(enum_cls: type[enum.Enum], value: Any, where: str) -> Any:
    if value is None or isinstance(value, (enum_cls, Mapping)):
        return value  # None and per-layer mappings are the backend's to check
    for member in enum_cls:
        if value == member.value or (
            isinstance(value, str) and value.lower() == member.name.lower()
        ):
            return member
    raise InvalidInputError(
        f"{where} = {value!r}; choose one of {', '.join(repr(m.value) for m in enum_cls)}"
    )


def _coerce_bool(value: Any, where: str) -> Any:
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise InvalidInputError(f"{where} = {value!r}; use true or false")
    return value  # a bool, or something the backend's own check rejects with its message


def _type_text(hint: Any) -> str:
    enum_cls = _enum_type(hint)
    if enum_cls is not None:
        return "|".join(str(m.value) for m in enum_cls)
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("collections.abc.", "")


def _value_text(value: Any) -> str:
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_value_text(v)}" for k, v in value.items()) + "}"
    return str(value)
