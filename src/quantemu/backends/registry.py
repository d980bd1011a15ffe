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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantemu.errors import InvalidInputError, RegistryError
from quantemu.program.model import LoweredModel
from quantemu.program.options import LoweringOptions

Outputs = Mapping[str, "np.ndarray | int"]
OpFunction = Callable[[Mapping[str, np.ndarray], Mapping[str, Any]], Outputs]


@dataclass(frozen=True)
class BackendSpec:
    """Everything the rest of quantemu needs to know about one backend, registered once.

    ``name``: the backend's name (``--backend NAME``). ``target``: one line, what it emulates.
    ``scheme``: one line, its quantization scheme. ``options``: its lowering options class (a
    :class:`~quantemu.program.options.LoweringOptions`). ``lower(graph, ranges, options)``:
    lowers an optimized, calibrated graph with an ``options`` instance into a
    :class:`~quantemu.program.LoweredModel`. ``header(options)``: every result-changing choice,
    for report headers. ``lint(graph)``: the target's model-constraints lint (a list of
    findings with ``severity``, ``node``, ``message`` and ``advice``), or None.
    ``prepare(graph, options)``: the toolchain's own graph rewrites, made on the optimized float
    graph *before* calibration so that the tensors they create get calibrated ranges (TFLite:
    LayerNormalization written out of MEAN, RSQRT, ... as TensorFlow's converter does), or None.
    ``calibration_free(options)``: True where the options select a pipeline that uses no
    activation ranges (NVDLA's FP16), so no calibration runs; None when every run needs them.
    """

    name: str
    target: str
    scheme: str
    options: type[LoweringOptions]
    lower: Callable[[Any, Mapping[str, Any], Any], LoweredModel]
    header: Callable[[Any], Mapping[str, str]]
    lint: Callable[[Any], Sequence[Any]] | None = None
    prepare: Callable[[Any, Any], Any] | None = None
    calibration_free: Callable[[Any], bool] | None = None

    def parse_options(self, options: Mapping[str, Any] | LoweringOptions | None) -> Any:
        """``options`` as this backend's options class (from a mapping of values or text)."""
        if isinstance(options, self.options):
            return options
        return self.options.from_mapping(options or {})

    def needs_calibration(self, options: Mapping[str, Any] | LoweringOptions | None) -> bool:
        """Whether lowering with ``options`` uses calibrated activation ranges."""
        if self.calibration_free is None:
            return True
        return not self.calibration_free(self.parse_options(options))

    def prepared(self, graph: Any, options: Any) -> Any:
        """``graph`` as this backend's toolchain rewrites it before calibration (itself when
        the backend rewrites nothing)."""
        return graph if self.prepare is None else self.prepare(graph, self.parse_options(options))


_BACKENDS: dict[str, BackendSpec] = {}


def register_backend(spec: BackendSpec) -> BackendSpec:
    """Register ``spec`` (:mod:`quantemu.backends.catalog` does it for every shipped backend)."""
    if spec.name in _BACKENDS and _BACKENDS[spec.name] is not spec:
        raise RegistryError(f"backend {spec.name!r} is already registered")
    _BACKENDS[spec.name] = spec
    return spec


def _catalog() -> dict[str, BackendSpec]:
    # The catalog imports every backend package, which import this module: import it late.
    from quantemu.backends import catalog  # noqa: F401, PLC0415

    return _BACKENDS


def backend_specs() -> list[BackendSpec]:
    """Every registered backend, in registration order."""
    return list(_catalog().values())


def backend_spec(name: str) -> BackendSpec:
    """The backend ``name``; an unknown name is an error listing the registered ones."""
    specs = _catalog()
    if name not in specs:
        raise InvalidInputError(f"unknown backend {name!r}; choose one of {', '.join(specs)}")
    return specs[name]


@dataclass(frozen=True)
class OpEntry:
    """One registered operator: its name, its known attributes and its entry point."""

    backend: str
    op: str
    fn: OpFunction
    attrs: frozenset[str]
    doc: str = ""


_REGISTRY: dict[tuple[str, str], OpEntry] = {}


def register(backend: str, op: str, *, attrs: frozenset[str] | set[str] | tuple = ()):
    """Decorator: register ``fn`` as the implementation of ``(backend, op)``.

    ``attrs`` lists every attribute name the operator accepts. Registering the same pair twice
    is an error, because it would silently replace an implementation.
    """
    name = str(backend)

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


def load_backends() -> None:
    """Import every backend (through the catalog), so that its operators are registered."""
    _catalog()


def is_implemented(backend: str) -> bool:
    """True when ``backend`` names a registered backend."""
    return backend in _catalog()


def known_backends() -> list[str]:
    """Names of every registered backend, in registration order."""
    return list(_catalog())


def registered() -> list[OpEntry]:
    """Every registered operator, sorted by ``(backend, op)``."""
    load_backends()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def lookup(backend: str, op: str) -> OpEntry:
    """The entry for ``(backend, op)``; a miss names what is registered."""
    load_backends()
    entry = _REGISTRY.get((backend, op))
    if entry is not None:
        return entry
    ops = sorted(o for b, o in _REGISTRY if b == backend)
    if not ops and backend not in _BACKENDS:
        known = sorted({b for b, _ in _REGISTRY} | set(_BACKENDS))
        raise RegistryError(
            f"unknown backend {backend!r}; quantemu knows {', '.join(known) or 'none'}"
        )
    raise RegistryError(
        f"backend {backend!r} has no operator {op!r}; registered: {', '.join(ops) or 'none'}"
    )


@contextlib.contextmanager
def isolated() -> Iterator[None]:
    """Run a block against an empty registry with no backends, then restore it.

    For tests: operators and backends registered inside the block (fakes, experiments) vanish
    when it exits, and the real backends are not visible, so results do not depend on which
    backends ship. The dicts are cleared and refilled in place because other modules hold
    references to them.
    """
    _catalog()  # load the real backends first, so that the block cannot trigger it
    saved_registry = dict(_REGISTRY)
    saved_backends = dict(_BACKENDS)
    _REGISTRY.clear()
    _BACKENDS.clear()
    try:
        yield
    finally:
        _REGISTRY.clear()
        _REGISTRY.update(saved_registry)
        _BACKENDS.clear()
        _BACKENDS.update(saved_backends)
