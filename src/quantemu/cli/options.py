"""``--option KEY=VALUE``, ``--option BACKEND.KEY=VALUE`` and ``--isa``, read through the registry.

Values stay text here: each backend's options class (``BackendSpec.options``, a
:class:`~quantemu.program.options.LoweringOptions`) types them by field, so ``threads=2`` is an
int for onednn, ``reduce_range=true`` a bool and ``grouped_conv=log`` an enum member, and an
unknown key is an error that lists the backend's options. :func:`check_options` does that for
every selected backend before any work starts.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from quantemu.backends.registry import backend_spec, backend_specs, known_backends
from quantemu.errors import InvalidInputError
from quantemu.program.options import LoweringOptions

OptionTexts = dict[str, dict[str, str]]


def isa_backends() -> list[str]:
    """The registered backends whose options have an ``isa`` field (``--isa`` applies to them)."""
    return [s.name for s in backend_specs() if "isa" in s.options.field_names()]


def parse_options(texts: Sequence[str], backends: Sequence[str], isa: str | None) -> OptionTexts:
    """``{backend: {key: text}}`` from ``--option`` texts and ``--isa``, for ``backends``.

    ``KEY=VALUE`` goes to every selected backend, ``BACKEND.KEY=VALUE`` to that one (which must
    be selected); ``--isa ISA`` is ``isa=ISA`` for the selected backends that have an ``isa``
    option, and an error when none has. Two different values for one backend's option (``--isa
    avx2 --option isa=avx512_core``) are an error naming both; the same value twice is not.
    """
    options: OptionTexts = {b: {} for b in backends}
    given: dict[tuple[str, str], str] = {}  # (backend, key) -> the argument that set it
    for text in texts:
        scope, name, value = _split(text, backends)
        for backend in [scope] if scope else backends:
            _set(options, given, (backend, name), value, f"--option {text}")
    if isa is not None:
        takers = [b for b in backends if b in isa_backends()]
        if not takers:
            raise InvalidInputError(
                f"--isa {isa}: backend {', '.join(backends)} has no ISA choice; --isa applies "
                f"to {', '.join(isa_backends()) or 'no registered backend'} (use --option "
                "KEY=VALUE for other lowering options)"
            )
        for backend in takers:
            _set(options, given, (backend, "isa"), isa, f"--isa {isa}")
    return options


def _set(options: OptionTexts, given: dict, where: tuple[str, str], value: str, arg: str) -> None:
    """Set one backend's option; a second, different value for it is an error naming both."""
    backend, name = where
    if where in given:
        cls = backend_spec(backend).options
        old = options[backend][name]
        if cls.typed_value(name, old) != cls.typed_value(name, value):
            raise InvalidInputError(
                f"{backend} option {name} is given two values: {given[where]} and {arg}; "
                "give it once"
            )
    options[backend][name] = value
    given[where] = arg


def _split(text: str, backends: Sequence[str]) -> tuple[str, str, str]:
    """``(backend or "", key, value)`` of one ``--option`` text, checked against the selection."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise InvalidInputError(
            f"--option {text!r}: expected KEY=VALUE or BACKEND.KEY=VALUE (e.g. isa=avx2)"
        )
    scope, _, name = key.rpartition(".")
    if scope and scope not in known_backends():
        raise InvalidInputError(
            f"--option {text!r}: {scope!r} is not a backend; backends: "
            f"{', '.join(known_backends())}"
        )
    if scope and scope not in backends:
        raise InvalidInputError(
            f"--option {text!r} is for {scope}, which is not selected "
            f"(--backend {' '.join(backends)})"
        )
    return scope, name, value


def check_options(options: Mapping[str, Mapping[str, Any]]) -> dict[str, LoweringOptions]:
    """Every backend's options, typed by its options class (once: the run goes on with these);
    the first bad one is an error."""
    return {b: backend_spec(b).parse_options(dict(o)) for b, o in options.items()}


def options_help(width: int = 96) -> str:
    """Each registered backend's options and their types or values, wrapped for ``--help``."""
    return "\n".join(
        textwrap.fill(
            f"{s.name}: {s.options.choices_text() or '(none)'}",
            width,
            initial_indent="  ",
            subsequent_indent="      ",
            break_on_hyphens=False,
        )
        for s in backend_specs()
    )
