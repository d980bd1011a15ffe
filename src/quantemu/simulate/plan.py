"""One plan per backend per run: typed options, the prepared graph, its ranges and their source.

Everything that lowers a model (``quantemu.compile``, ``quantemu run`` on one backend or all,
``--against``, the support table of ``quantemu inspect --support``, quantization-aware training,
a Dask worker) goes through the same three steps, here and nowhere else:

1. :func:`prepare_graph`: the model loaded, its weights checked, symbolic input dimensions bound
   from the data, and optimized (once per run: every backend starts from the same graph);
2. :func:`make_plans`: for each backend, its options typed by its options class (once), the
   optimized graph rewritten as the backend's toolchain does (``BackendSpec.prepare``), and its
   activation ranges, decided by :func:`_decide_ranges` in one order of precedence (below);
   backends whose toolchains see the same graph share one calibration;
3. :meth:`BackendPlan.lower`: the backend derives every integer parameter from the plan.

Ranges, first match wins (:class:`RangeSource` records which):

- ``NONE``: the options select a pipeline that uses no ranges (nvdla ``precision="fp16"``);
- ``CARRIED``: the model file carries learned ranges (``QatModel.export``);
- ``GIVEN``: precomputed ranges (``calibration=``, ``quantemu run --ranges``);
- ``MODEL``: no data, and the model is fully quantized (an int8 TFLite file): its own;
- ``CALIBRATED``: observed on the calibration data;
- ``SAMPLED``: two random samples through the float graph (the support table, which needs
  ranges only to lower, never to report numbers).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from quantemu.backends.registry import BackendSpec, backend_spec
from quantemu.calibration.feeds import batch_axes
from quantemu.calibration.from_model import FROM_MODEL, is_fully_quantized, ranges_from_model
from quantemu.calibration.ranges import CalibrationRanges, uncalibrated
from quantemu.errors import InvalidInputError, QuantemuError
from quantemu.graph import Graph, check_imported, inputs, optimize
from quantemu.graph.passes_shape import bind_from_data, symbolic_input_dims
from quantemu.program.options import LoweringOptions
from quantemu.simulate.compiled import RANGES_KEY, Program

#: What a backend's options may be given as: typed, or a mapping of values or their text.
OptionsLike = LoweringOptions | Mapping[str, Any] | None


class RangeSource(enum.Enum):
    """Where a plan's activation ranges came from (the module docstring gives the order)."""

    NONE = "none"
    CARRIED = "carried"
    GIVEN = "given"
    MODEL = "model"
    CALIBRATED = "calibrated"
    SAMPLED = "sampled"


@dataclass(frozen=True)
class BackendPlan:
    """One backend's share of a run: everything its ``lower()`` consumes, decided once.

    ``backend``: the registered name; ``options``: the backend's typed options; ``graph``: the
    optimized graph as the backend's toolchain rewrites it; ``ranges``: its activation ranges;
    ``source``: where they came from. A plan is a plain value: a Dask worker gets one and
    lowers it; quantization-aware training replaces its graph (new weights) or its ranges
    (learned ones) with :func:`dataclasses.replace` and lowers again.
    """

    backend: str
    options: LoweringOptions
    graph: Graph
    ranges: CalibrationRanges
    source: RangeSource

    @property
    def spec(self) -> BackendSpec:
        """The backend's registered spec."""
        return backend_spec(self.backend)

    def lower(self) -> Program:
        """The lowered program: the backend derives every integer parameter from the plan."""
        return Program(self, self.spec.lower(self.graph, self.ranges, self.options))

    def with_graph(self, graph: Graph) -> BackendPlan:
        """The plan with another graph of the same tensors (changed weights)."""
        return replace(self, graph=graph)

    def with_ranges(self, ranges: CalibrationRanges) -> BackendPlan:
        """The plan with other ranges of the same tensors (learned ones)."""
        return replace(self, ranges=ranges)


def typed_options(backend: str, options: OptionsLike) -> LoweringOptions:
    """``options`` as ``backend``'s options class: parsed here when given as a mapping, as they
    are when already typed (so typed options travel through a run without a second parse)."""
    return backend_spec(backend).parse_options(options)


def prepare_graph(graph: Graph, data: Any = None) -> Graph:
    """``graph`` checked, bound and optimized: the graph every backend of a run starts from.

    NaN/Inf weights are an error before optimization folds them into other tensors; a float
    ``data`` array binds the single input's symbolic height and width; any symbolic dimension
    beyond the batch left after that is an error that says how to bind it.
    """
    inputs.check_weights(graph)
    if isinstance(data, np.ndarray) and data.dtype.kind == "f":
        graph = bind_from_data(graph, data)
    symbolic = _unbound_dims(graph)
    if symbolic:
        raise InvalidInputError(
            "the model's inputs have symbolic dimensions beyond the batch "
            f"({'; '.join(symbolic)}); "
            "bind them: graph.with_input_shapes({name: (None, C, H, W)}), or calibrate with an "
            "array (its shape binds them), or --input-shape NAME=Nx3x224x224 on the command line"
        )
    return optimize(graph)


def _unbound_dims(graph: Graph) -> list[str]:
    """``name: shape`` of the inputs with a symbolic dimension beyond their batch: axis 0, or
    a multi-input model's batch axis elsewhere (a recurrent state's ``(layers, N, hidden)``)."""
    unbound = symbolic_input_dims(graph)
    if not unbound or len(graph.inputs) == 1:
        return unbound
    axes = batch_axes(graph)
    return [
        f"{i.name}: {'x'.join(map(str, i.shape))}"
        for i in graph.inputs
        if any(not isinstance(d, int) for k, d in enumerate(i.shape) if k != (axes[i.name] or 0))
    ]


def make_plans(
    graph: Graph,
    options: Mapping[str, LoweringOptions],
    calib: Any = None,
    *,
    given: CalibrationRanges | None = None,
    errors: dict[str, str] | None = None,
    **calibrate_args: Any,
) -> dict[str, BackendPlan]:
    """A plan for each backend of ``options`` (backend -> typed options), from ``graph``
    (:func:`prepare_graph`'s). Backends whose toolchains see the same graph share one
    calibration on ``calib``; ``calibrate_args`` go to ``quantemu.calibrate``. With ``errors``
    a backend that cannot be planned is recorded there (backend -> message) and the others
    still are; without it the error propagates."""
    done: dict[tuple[str, ...], tuple[CalibrationRanges, RangeSource]] = {}
    plans = {}
    for backend, opts in options.items():
        try:
            plans[backend] = _plan(graph, backend, opts, done, (calib, given, calibrate_args))
        except QuantemuError as exc:
            if errors is None:
                raise
            errors[backend] = str(exc)
    return plans


def _plan(graph: Graph, backend: str, opts: LoweringOptions, done: dict, data: tuple):
    """One backend's plan; ``done`` holds the ranges of the graphs already seen."""
    spec = backend_spec(backend)
    seen = spec.prepared(graph, opts)
    check_imported(seen, backend)  # before calibration runs the float executor
    if not spec.needs_calibration(opts):
        return BackendPlan(backend, opts, seen, uncalibrated(), RangeSource.NONE)
    key = tuple(n.name for n in seen.nodes)
    if key not in done:
        done[key] = _decide_ranges(seen, *data)
    ranges, source = done[key]
    if source in (RangeSource.GIVEN, RangeSource.CARRIED) and seen is not graph:
        _check_ranges_cover(seen, ranges, backend)
    return BackendPlan(backend, opts, seen, ranges, source)


def plan_model(
    model: Any,
    backend: str,
    calib: Any = None,
    *,
    options: OptionsLike = None,
    calibration: CalibrationRanges | None = None,
    **calibrate_args: Any,
) -> BackendPlan:
    """The plan of one backend for ``model`` (a Graph, an ONNX or a TFLite path)."""
    opts = typed_options(backend, options)
    graph = prepare_graph(load_graph(model), calib)
    return make_plans(graph, {backend: opts}, calib, given=calibration, **calibrate_args)[backend]


def observe_ranges(graph: Graph, data: Any, *, optimized: bool = True, **calibrate_args) -> Any:
    """The ranges ``quantemu calibrate`` writes: observed on ``data`` over ``graph`` optimized
    as every run optimizes it (as it is with ``optimized=False``); ``calibrate_args`` go to
    ``quantemu.calibrate``."""
    from quantemu.calibration.api import calibrate  # noqa: PLC0415 (keeps import light)

    return calibrate(optimize(graph) if optimized else graph, data, **calibrate_args)


def load_graph(model: Any) -> Graph:
    """``model`` as a Graph (a Graph is returned as it is; a path is imported)."""
    if isinstance(model, Graph):
        return model
    from quantemu.graph.loading import load_model  # noqa: PLC0415 (imports onnx/tflite)

    return load_model(model)


def _decide_ranges(
    graph: Graph, calib: Any, given: CalibrationRanges | None, calibrate_args: Mapping[str, Any]
) -> tuple[CalibrationRanges, RangeSource]:
    """The ranges of a graph that needs them, in the module docstring's order."""
    carried = graph.metadata.get(RANGES_KEY)
    if carried is not None:  # learned ranges written with the model win over any calibration
        return carried_ranges(carried), RangeSource.CARRIED
    if given is not None:
        return given, RangeSource.GIVEN
    if calib is None and is_fully_quantized(graph):
        return ranges_from_model(graph), RangeSource.MODEL
    if calib is None:
        raise InvalidInputError(
            "compile needs calibration data (calib=...) or precomputed ranges "
            "(calibration=quantemu.calibrate(...) or CalibrationRanges.load(path))"
        )
    from quantemu.calibration.api import calibrate  # noqa: PLC0415 (keeps import light)

    return calibrate(graph, calib, **calibrate_args), RangeSource.CALIBRATED


def needs_data(graph: Graph, plans_options: Mapping[str, LoweringOptions]) -> bool:
    """Whether a run of ``graph`` on these backends needs calibration data: not when every
    backend's pipeline uses no ranges, nor when the model carries its ranges or is fully
    quantized."""
    if all(not backend_spec(b).needs_calibration(o) for b, o in plans_options.items()):
        return False
    return RANGES_KEY not in graph.metadata and not is_fully_quantized(graph)


def carried_ranges(text: str) -> CalibrationRanges:
    """The ranges a model file carries (its ``quantemu.ranges`` property), checked."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"the model's {RANGES_KEY} property is not a JSON ranges document ({exc}); "
            "re-export the model (QatModel.export)"
        ) from exc
    return CalibrationRanges.from_json(document)


def _check_ranges_cover(graph: Graph, ranges: CalibrationRanges, backend: str) -> None:
    """Precomputed ranges of the float graph lack the tensors a toolchain's own rewrites
    create (``BackendSpec.prepare``): say so, and how to calibrate the rewritten graph."""
    if ranges.observer == FROM_MODEL:
        return
    missing = [
        out for node in graph.nodes for out in node.outputs if out and out not in ranges.tensors
    ]
    if missing:
        raise InvalidInputError(
            f"the calibration ranges have no range for {len(missing)} tensor(s) that {backend}'s "
            f"toolchain creates when it rewrites the graph ({', '.join(missing[:4])}"
            f"{' ...' if len(missing) > 4 else ''}); calibrate the graph as {backend} sees it: "
            f"quantemu.calibrate(quantemu.prepare(graph, {backend!r}), data), or pass calib=data"
        )


def typed_options_of(
    backends: Sequence[str], options: Mapping[str, OptionsLike] | None = None
) -> dict[str, LoweringOptions]:
    """Each of ``backends``' options typed, once (``options``: backend -> options)."""
    return {b: typed_options(b, (options or {}).get(b)) for b in backends}
