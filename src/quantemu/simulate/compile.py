"""``quantemu.compile``: quantize a float model for a target, the way its toolchain does.

``prog = quantemu.compile(graph, backend="xs3", calib=x_calib, **options)`` optimizes the float
graph (batch-norm folding, activation fusion, ...), calibrates every tensor on ``calib``, and
hands both to the backend's ``lower()``, which derives the integer parameters with the vendor's
rules and chooses the target operators. ``prog.run(x)`` then runs the integer program;
``prog.evaluate(x, labels)`` compares it layer by layer with the float model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantemu._version import __version__
from quantemu.backends.registry import backend_spec
from quantemu.calibration.from_model import FROM_MODEL, is_fully_quantized, ranges_from_model
from quantemu.calibration.ranges import NO_CALIBRATION, CalibrationRanges, uncalibrated
from quantemu.errors import InvalidInputError
from quantemu.graph import Graph, check_imported, inputs, optimize
from quantemu.graph.passes_shape import bind_from_data, fixed_batch, symbolic_input_dims
from quantemu.program import LinearEncoding, LoweredModel, QTensor, RunResult, run_lowered
from quantemu.simulate.evaluate import Evaluation, evaluate
from quantemu.simulate.streaming import Keep, elements_per_sample, run_in_batches


@dataclass(frozen=True)
class Program:
    """A float model lowered onto one backend (see the module docstring)."""

    backend: str
    graph: Graph
    ranges: CalibrationRanges
    lowered: LoweredModel
    # the lowering options, as given: lower_prepared(graph, backend, ranges, **options) makes
    # this program again (a cluster worker rebuilds it so)
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def header(self) -> dict[str, str]:
        """Every result-changing choice, for report headers (DESIGN principle 9)."""
        return {
            "backend": self.backend,
            **{str(k): str(v) for k, v in self.lowered.header.items()},
            "calibration": (
                "the model's own quantization"
                if self.ranges.observer == FROM_MODEL
                else "none (the options select a pipeline that needs none)"
                if self.ranges.observer == NO_CALIBRATION
                else f"{self.ranges.observer}, {self.ranges.samples} samples"
            )
            + (", ranges carried in the model file" if RANGES_KEY in self.graph.metadata else ""),
            "quantemu": __version__,
        }

    def check_input(self, x) -> np.ndarray:
        """``x`` as the batch the model's single input takes, or a clear error.

        Float data is returned as float32. Integer data must be the model's own input codes (a
        pre-quantized model's input dtype, e.g. int8) and is returned as it is.
        """
        if len(self.graph.inputs) != 1:
            raise InvalidInputError(
                f"the model has {len(self.graph.inputs)} inputs; pass a dict to run_feeds()"
            )
        info = self.graph.inputs[0]
        x = inputs.as_array(x, info.name)
        if x.dtype.kind in "iu":
            self._input_encoding(x.dtype)
        elif x.dtype.kind != "f":
            raise InvalidInputError(
                f"input {info.name!r}: expected float data (as the float model takes it), got "
                f"dtype {x.dtype}; normalize it as the model expects and pass float32"
            )
        batch = fixed_batch(self.graph)
        if batch is not None and x.ndim and x.shape[0] != batch and x.shape[0]:
            raise InvalidInputError(
                f"input {info.name!r}: the model takes batches of exactly {batch} sample(s) (its "
                f"batch is fixed and could not be relaxed), got {x.shape[0]}; run {batch} at a "
                "time (evaluate() and quantemu run split the data themselves)"
            )
        inputs.check_shape(x, info.name, info.shape)
        inputs.check_samples(x, info.name)
        return x if x.dtype.kind in "iu" else inputs.float32_checked(x, info.name)

    def _input_encoding(self, dtype: np.dtype) -> LinearEncoding:
        """The model's own quantization of its input, which integer input codes are in."""
        info = self.graph.inputs[0]
        ov = self.graph.quant_overrides.get(info.name)
        if ov is None or np.dtype(ov.dtype) != dtype:
            own = f"its codes are {ov.dtype}" if ov is not None else "it takes float data"
            raise InvalidInputError(
                f"input {info.name!r}: got integer data of dtype {dtype}, but {own}; pass the "
                "model's own input codes, or float data as the float model takes it"
            )
        return LinearEncoding(float(ov.scale), int(ov.zero_point), dtype=ov.dtype)

    def float_input(self, x: np.ndarray) -> np.ndarray:
        """The float values of a checked batch (integer codes are dequantized)."""
        if x.dtype.kind in "iu":
            return self._input_encoding(x.dtype).dequantize(x).astype(np.float32)
        return x

    def run(self, x, *, keep: Keep | str = "outputs") -> RunResult:
        """Run ``x`` (any number of samples) through the integer program.

        ``keep="outputs"``: the graph outputs' codes and every layer's counters, computed in
        batches side by side on the cores (bounded memory); ``keep="all"``: every layer's
        tensors too, in one pass, up to a size limit; ``keep="internals"``: also every layer's
        internals (accumulators, ...) (:mod:`quantemu.simulate.streaming`).
        """
        keep = Keep.parse(keep)
        x = self.check_input(x)
        encoding = self._input_encoding(x.dtype) if x.dtype.kind in "iu" else None
        name = self.graph.inputs[0].name

        def run_batch(batch: np.ndarray) -> RunResult:
            feed = QTensor(batch, encoding) if encoding is not None else batch
            return run_lowered(
                self.lowered, self.graph.outputs, {name: feed}, internals=keep is Keep.INTERNALS
            )

        streamable = fixed_batch(self.graph) is None and all(
            isinstance(info.shape[0], str) for info in self.graph.output_infos if info.shape
        )
        shapes = [self.graph.tensors[o].shape for n in self.graph.nodes for o in n.outputs if o]
        return run_in_batches(
            run_batch,
            x,
            self.graph.outputs,
            keep,
            streamable=streamable,
            elements=elements_per_sample(shapes),
        )

    def run_feeds(self, feeds: Mapping[str, np.ndarray]) -> RunResult:
        """Run a model with several inputs (name -> float array, or a QTensor of codes)."""
        feeds = inputs.check_feeds(self.graph, feeds)
        return run_lowered(self.lowered, self.graph.outputs, feeds)

    def evaluate(
        self, x, labels=None, *, batch_size: int = 128, on_batch=None, on_result=None, client=None
    ) -> Evaluation:
        """Per-layer SQNR, cosine, LSB error and counters against the float model
        (``on_result`` receives each batch's :class:`RunResult`; ``client``: a
        ``dask.distributed.Client`` to run the batches on, :mod:`quantemu.simulate.distributed`).
        ``x``: an array, or a sample set read lazily (shards, a glob, an image folder)."""
        return evaluate(
            self,
            x,
            labels,
            batch_size=batch_size,
            on_batch=on_batch,
            on_result=on_result,
            client=client,
        )

    def report(self, x, labels=None, **kwargs) -> Evaluation:
        """:meth:`evaluate`; render the result with :mod:`quantemu.report`."""
        return self.evaluate(x, labels, **kwargs)


def _load(model) -> Graph:
    if isinstance(model, Graph):
        return model
    from quantemu.graph.loading import load_model  # noqa: PLC0415 (imports onnx/tflite)

    return load_model(model)


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


def needs_calibration(backend: str, options: Mapping[str, Any] | None = None) -> bool:
    """Whether ``backend`` lowered with ``options`` uses calibrated activation ranges (False
    for a floating-point pipeline such as nvdla's ``precision="fp16"``)."""
    return backend_spec(backend).needs_calibration(options)


def prepare(model, /, backend: str, **options: Any) -> Graph:
    """``model`` optimized and rewritten as ``backend``'s toolchain does before calibration
    (the graph ``quantemu.compile`` calibrates and lowers)."""
    spec = backend_spec(backend)
    return spec.prepared(optimize(_load(model)), spec.parse_options(options))


def calibrate_for_backends(
    graph: Graph,
    backends,
    calib,
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    **calibrate_args: Any,
) -> dict[str, CalibrationRanges]:
    """Ranges for each of ``backends``: of the float graph, or of the graph as a backend's
    toolchain rewrites it (``BackendSpec.prepare``), each distinct graph calibrated once;
    ``calib=None``: a fully quantized model's own. ``calibrate_args`` go to ``calibrate``."""
    from quantemu.calibration.api import calibrate  # noqa: PLC0415 (keeps import light)

    optimized = optimize(graph)
    done: dict[tuple[str, ...], CalibrationRanges] = {}
    ranges = {}
    for backend in backends:
        spec = backend_spec(backend)
        opts = spec.parse_options((options or {}).get(backend, {}))
        if not spec.needs_calibration(opts):
            ranges[backend] = uncalibrated()
            continue
        seen = spec.prepared(optimized, opts)
        key = tuple(n.name for n in seen.nodes)
        if key not in done:
            if RANGES_KEY in seen.metadata:  # learned ranges written with the model win
                done[key] = carried_ranges(seen.metadata[RANGES_KEY])
            elif calib is None:
                done[key] = ranges_from_model(seen)
            else:
                done[key] = calibrate(seen, calib, **calibrate_args)
        ranges[backend] = done[key]
    return ranges


def compile_model(
    model,
    /,
    backend: str,
    calib=None,
    *,
    observer: str = "minmax",
    calibration: CalibrationRanges | None = None,
    progress: bool | None = None,
    **options: Any,
) -> Program:
    """Lower ``model`` (a Graph, an ONNX or a TFLite path) onto ``backend`` (module docstring).

    ``calib``: calibration data (anything ``quantemu.calibrate`` accepts); not needed when
    precomputed ``calibration`` ranges are given, nor for a fully quantized model (an int8
    TFLite file), whose own quantization is used, nor where the options select a pipeline
    that uses no ranges (``precision="fp16"`` on nvdla), which ignores it. ``options`` go to
    the backend's lowering (e.g. ``isa="avx2"`` for onednn, ``model="device"`` for xs3:
    ``model`` is positional-only here so that backend options may use the name); unknown ones
    are errors.
    """
    graph, ranges = calibrated(
        model,
        backend,
        calib,
        observer=observer,
        calibration=calibration,
        progress=progress,
        **options,
    )
    return lower_prepared(graph, backend, ranges, **options)


def calibrated(
    model,
    /,
    backend: str,
    calib=None,
    *,
    observer: str = "minmax",
    calibration: CalibrationRanges | None = None,
    progress: bool | None = None,
    **options: Any,
) -> tuple[Graph, CalibrationRanges]:
    """The first half of :func:`compile_model`: ``model`` optimized and rewritten as
    ``backend``'s toolchain does (:func:`prepare`), and its ranges (calibrated on ``calib``,
    given as ``calibration``, or the model's own). :func:`lower_prepared` is the second half:
    a caller that changes the graph's weights in between (quantization-aware training) lowers
    the changed graph with the same ranges."""
    from quantemu.calibration.api import calibrate  # noqa: PLC0415 (keeps import light)

    spec = backend_spec(backend)
    opts = spec.parse_options(options)
    graph = _load(model)
    inputs.check_weights(graph)  # before optimization folds a NaN into other tensors
    if isinstance(calib, np.ndarray):
        graph = bind_from_data(graph, calib)  # dynamic height and width take the data's
    symbolic = symbolic_input_dims(graph)
    if symbolic:
        raise InvalidInputError(
            "the model's inputs have symbolic dimensions beyond the batch "
            f"({'; '.join(symbolic)}); "
            "bind them: graph.with_input_shapes({name: (None, C, H, W)}), or calibrate with an "
            "array (its shape binds them), or --input-shape NAME=Nx3x224x224 on the command line"
        )
    optimized = optimize(graph)
    graph = spec.prepared(optimized, opts)
    check_imported(graph, backend)  # before calibration runs the float executor
    ranges = calibration
    if not spec.needs_calibration(opts):
        return graph, uncalibrated()  # the pipeline uses no ranges: calibrating would be noise
    carried = graph.metadata.get(RANGES_KEY)
    if carried is not None:  # learned ranges written with the model win over any calibration
        ranges = carried_ranges(carried)
    if ranges is None and calib is None and is_fully_quantized(graph):
        ranges = ranges_from_model(graph)  # an int8 TFLite model fixes every quantization
    if ranges is None:
        if calib is None:
            raise InvalidInputError(
                "compile needs calibration data (calib=...) or precomputed ranges "
                "(calibration=quantemu.calibrate(...) or CalibrationRanges.load(path))"
            )
        ranges = calibrate(graph, calib, observer=observer, progress=progress)
    if graph is not optimized:
        _check_ranges_cover(graph, ranges, backend)
    return graph, ranges


#: ``Graph.metadata`` key of ranges written with the model (``QatModel.export``).
RANGES_KEY = "quantemu.ranges"


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


def lower_prepared(
    graph: Graph, /, backend: str, ranges: CalibrationRanges, **options: Any
) -> Program:
    """Lower a graph :func:`calibrated` returned (optimized and rewritten for ``backend``)
    with ``ranges``: the backend derives every integer parameter from the graph's weights and
    the ranges, as :func:`compile_model` does."""
    spec = backend_spec(backend)
    lowered = spec.lower(graph, ranges, spec.parse_options(options))
    return Program(
        backend=backend, graph=graph, ranges=ranges, lowered=lowered, options=dict(options)
    )
