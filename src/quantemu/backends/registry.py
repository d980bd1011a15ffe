"""The explicit ``(backend, op) -> implementation`` registry (DESIGN principle 6).

A backend registers each operator it emulates with :func:`register`. The registered callable is
the vector-format entry point: it takes the decoded input tensors and the JSON attributes of a
conformance case (see ``conformance/FORMAT.md``) and returns the named outputs (arrays, or plain
ints for counters). The attribute names an operator knows are declared at registration, so a
runner can report an unknown attribute as *unsupported* before calling anything.

A lookup miss raises :class:`~quantemu.errors.RegistryError` listing what is registered.
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import importlib.util
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantemu.errors import RegistryError

Outputs = Mapping[str, "np.ndarray | int"]
OpFunction = Callable[[Mapping[str, np.ndarray], Mapping[str, Any]], Outputs]


class Backend(enum.Enum):
    """The inference targets quantemu knows of (``DESIGN.md``, table of backends)."""

    XS3 = "xs3"
    NVDLA = "nvdla"
    ONEDNN = "onednn"
    NNIE = "nnie"


def _discover() -> dict[Backend, str]:
    """Backends whose package ``quantemu.backends.<name>`` exists.

    Such a package registers its operators when imported. A backend named in :class:`Backend`
    without a package is known but not implemented yet; its vectors are reported as unsupported
    with that reason.
    """
    found = {}
    for backend in Backend:
        module = f"{__package__}.{backend.value}"
        if importlib.util.find_spec(module) is not None:
            found[backend] = module
    return found


_IMPLEMENTED: dict[Backend, str] = _discover()


@dataclass(frozen=True)
class OpEntry:
    """One registered operator: its name, its known attributes and its entry point."""

    backend: str
    op: str
    fn: OpFunction
    attrs: frozenset[str]
    doc: str = ""


_REGISTRY: dict[tuple[str, str], OpEntry] = {}


def register(backend: Backend | str, op: str, *, attrs: frozenset[str] | set[str] | tuple = ()):
    """Decorator: register ``fn`` as the implementation of ``(backend, op)``.

    ``attrs`` lists every attribute name the operator accepts. Registering the same pair twice
    is an error, because it would silently replace an implementation.
    """
    name = Backend(backend).value

    def decorate(fn: OpFunction) -> OpFunction:
        key = (name, op)
        if key in _REGISTRY:
            raise RegistryError(
                f"({name}, {op}) is already registered by {_REGISTRY[key].fn.__module__}; "
                "each operator has exactly one implementation"
            )
        doc = (fn.__doc__ or "").strip().splitlines()
        _REGISTRY[key] = OpEntry(name, op, fn, frozenset(attrs), doc[0] if doc else "")
        return fn

    return decorate


def load_backends(only: str | None = None) -> None:
    """Import every implemented backend (or just ``only``) so that its operators are registered.

    :func:`lookup` imports only the backend it is asked about, so that a backend whose import
    fails does not take every other backend's operators down with it.
    """
    for backend, module in _IMPLEMENTED.items():
        if only is None or backend.value == only:
            importlib.import_module(module)


def is_implemented(backend: str) -> bool:
    """True when ``backend`` names a backend whose package is implemented."""
    return any(b.value == backend for b in _IMPLEMENTED)


def known_backends() -> list[str]:
    """Names of every backend quantemu knows of, implemented or not."""
    return [b.value for b in Backend]


def registered() -> list[OpEntry]:
    """Every registered operator, sorted by ``(backend, op)``."""
    load_backends()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def lookup(backend: str, op: str) -> OpEntry:
    """The entry for ``(backend, op)``; a miss names what is registered and why."""
    load_backends(only=backend)
    entry = _REGISTRY.get((backend, op))
    if entry is not None:
        return entry
    if backend not in known_backends():
        raise RegistryError(
            f"unknown backend {backend!r}; quantemu knows {', '.join(known_backends())}"
        )
    ops = sorted(o for b, o in _REGISTRY if b == backend)
    if not is_implemented(backend):
        raise RegistryError(f"backend {backend!r} is not implemented yet (no operators registered)")
    raise RegistryError(
        f"backend {backend!r} has no operator {op!r}; registered: {', '.join(ops) or 'none'}"
    )


@contextlib.contextmanager
def isolated() -> Iterator[None]:
    """Run a block against an empty registry with no implemented backends, then restore it.

    For tests: operators registered inside the block (fakes, experiments) vanish when it exits,
    and the real backends are neither imported nor visible, so results do not depend on which
    backends happen to be implemented. The dicts are cleared and refilled in place because other
    modules hold references to them.
    """
    saved_registry = dict(_REGISTRY)
    saved_implemented = dict(_IMPLEMENTED)
    _REGISTRY.clear()
    _IMPLEMENTED.clear()
    try:
        yield
    finally:
        _REGISTRY.clear()
        _REGISTRY.update(saved_registry)
        _IMPLEMENTED.clear()
        _IMPLEMENTED.update(saved_implemented)
