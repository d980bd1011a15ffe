"""Raw register fields: declaration, width validation and the hardware's signed readings.

NVDLA software writes unsigned bit patterns into fixed-width register fields; the datapath then
reads some of them as two's-complement numbers, sometimes with a width different from the field's
(``conformance/nvdla.md`` §1.1). A register block here is a frozen dataclass whose attributes are
the raw fields, named exactly as in the NVDLA register manual and declared with :func:`field`
(width in bits, default), or all at once from a table with :func:`declare` (repeated groups of
fields, such as the BS and BN units, then come from one table). Construction validates every
value against its width; the decoding the hardware does (sign extension, masking) lives in the
blocks' ``decode`` methods, never in the stored values, so what you read back is what software
wrote.
"""

from __future__ import annotations

import dataclasses
import enum
import numbers
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from quantemu.errors import InvalidInputError
from quantemu.intmath import wrap

#: A field's width in bits, or ``(bits, default)`` (the default is 0 otherwise).
Width = int | tuple[int, int]
_Block = TypeVar("_Block", bound=type)


def field(bits: int, default: int = 0) -> Any:
    """Declare a raw register field of ``bits`` bits (a dataclass field with the width attached)."""
    return dataclasses.field(default=default, metadata={"bits": bits})


def declare(layout: Mapping[str, Width]) -> Callable[[_Block], _Block]:
    """Class decorator: the block becomes a frozen dataclass whose raw fields are ``layout``'s
    (name -> :data:`Width`), in that order, each as :func:`field` declares it."""

    def build(cls: _Block) -> _Block:
        cls.__annotations__ = dict.fromkeys(layout, int)
        for name, width in layout.items():
            bits, default = (width, 0) if isinstance(width, int) else width
            setattr(cls, name, field(bits, default))
        return dataclasses.dataclass(frozen=True)(cls)

    return build


def enum_field(name: str, kind: type[enum.IntEnum], doc: str) -> property:
    """A read-only property: field ``name`` decoded as the enum ``kind``."""
    return property(lambda block: kind(getattr(block, name)), doc=doc)


def sx(raw: int, bits: int) -> int:
    """The raw field value ``raw`` read as a signed ``bits``-bit number (the page's ``sx``).

    >>> sx(4294967291, 32), sx(0x7F, 8), sx(0x80, 8), sx(0x1F, 5)
    (-5, 127, -128, -1)
    """
    return int(wrap(int(raw), bits))


def _check_value(block: str, name: str, value: object, bits: int) -> int:
    if isinstance(value, (bool, float)) or not isinstance(value, numbers.Integral):
        raise InvalidInputError(
            f"{block}: field {name} must be an int (the raw unsigned field value), got "
            f"{value!r} ({type(value).__name__})"
        )
    v = int(value)
    if not 0 <= v < 1 << bits:
        hint = ""
        if v < 0 and v >= -(1 << (bits - 1)):
            hint = f"; a signed value is written in two's complement: {v} is {v % (1 << bits)}"
        raise InvalidInputError(
            f"{block}: field {name} = {v} does not fit its {bits}-bit field (raw unsigned "
            f"values 0..{(1 << bits) - 1}){hint}"
        )
    return v


@dataclasses.dataclass(frozen=True)
class RegisterBlock:
    """Base of the per-unit register blocks: validated raw fields, hardware names.

    Subclasses declare their fields with :func:`field` and may override :meth:`_check` for
    constraints between fields (a reserved encoding, an FP16 mode that is not emulated).
    """

    UNIT: ClassVar[str] = "registers"

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = _check_value(self.UNIT, f.name, getattr(self, f.name), f.metadata["bits"])
            object.__setattr__(self, f.name, value)  # normalise NumPy ints to Python ints
        self._check()

    def _check(self) -> None:
        """Constraints between fields; the default has none."""

    @classmethod
    def widths(cls) -> dict[str, int]:
        """Field name -> width in bits, in declaration order."""
        return {f.name: f.metadata["bits"] for f in dataclasses.fields(cls)}

    @classmethod
    def from_fields(cls, values: Mapping[str, Any], *, complete: bool = False):
        """Build the block from a mapping of raw field values.

        Unknown names are an error. Fields not given keep their defaults, unless ``complete``
        is true (then every field must be given, as in a conformance case).
        """
        known = cls.widths()
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise InvalidInputError(
                f"{cls.UNIT}: unknown field(s) {', '.join(unknown)}; the fields are "
                f"{', '.join(known)}"
            )
        missing = [name for name in known if name not in values]
        if complete and missing:
            raise InvalidInputError(f"{cls.UNIT}: missing field(s) {', '.join(missing)}")
        return cls(**dict(values))

    def raw(self) -> dict[str, int]:
        """Every field's raw value, by name (what software writes)."""
        return {name: getattr(self, name) for name in self.widths()}

    def signed(self, name: str, bits: int | None = None) -> int:
        """Field ``name`` read as a signed number of its own width (or of ``bits``)."""
        return sx(getattr(self, name), bits or self.widths()[name])
