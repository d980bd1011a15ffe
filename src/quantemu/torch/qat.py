"""Quantization-aware training whose forward pass is the target's exact integer arithmetic.

``qat = quantemu.torch.prepare(model, backend, calib, **options)`` builds the run's plan exactly
as ``quantemu.compile`` does (:class:`~quantemu.simulate.plan.BackendPlan`: the same typed
options, the same graph, the same ranges) and returns a
:class:`QatModel`: a ``torch.nn.Module`` whose trainable parameters are the float weights and
biases of the graph's Conv, ConvTranspose, Gemm and MatMul nodes.

**Forward.** The backend lowers the plan with the *current* weights and ranges (calibrated, or
learned) (:meth:`~quantemu.simulate.plan.BackendPlan.lower`: every integer parameter derived as
the vendor's toolchain derives it) and runs its exact layers on the batch. The module returns the
dequantized graph outputs: element for element what ``quantemu.compile(...).run(x)`` gives for
these weights, in train and in eval mode. The lowering is redone only when a weight or a learned
range has changed since the last forward (an optimizer step, any in-place update).

**Backward** (straight-through estimator). With gradients enabled, a float twin of the graph in
torch (:mod:`quantemu.torch.ops`) runs beside the exact program; at every tensor the program
quantizes, the twin's value is replaced by the exact dequantized one in the forward pass, and the
gradient passes through unchanged where the twin's value lies inside the tensor's calibrated
range and is zero outside it (clipped STE). So each layer's weight gradient is computed from the
activations the target really produces, and every weight quantizer is the identity for the
gradient.

After each forward, ``qat.counters`` holds every layer's counters (saturations, pair clipping,
LUT overflow, ...) for a training loop to log, and ``qat.program`` the lowered program.

``qat.export(path)`` writes the trained model: an ONNX file that ``quantemu run`` and
``quantemu.compile`` simulate to exactly the module's eval outputs (the ranges travel in the file
as the ``quantemu.ranges`` property and win over any calibration).

On NNIE's logarithmic grid the straight-through gradient follows the grid: it is scaled by
``level / x`` (the derivative of ``2^(round(16 log2 x) / 16)`` with the rounding passed through).

``prepare(..., ranges="learned")`` trains the ends of every per-tensor activation range with the
weights (LSQ, :mod:`quantemu.torch.ste`); the backend derives its integer parameters from the
current ranges at every forward pass, and ``export`` writes them.

Where the scheme is linear, the exported file also carries Q/DQ pairs for QDQ tools
(:meth:`QatModel.export`).
"""

from __future__ import annotations

import dataclasses
import io
import json
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
import torch

from quantemu.calibration.ranges import CalibrationRanges
from quantemu.errors import InvalidInputError, UnsupportedError, choose
from quantemu.graph import Graph, load_onnx
from quantemu.graph.onnx_export import save_onnx
from quantemu.simulate import LinearEncoding
from quantemu.simulate.compile import RANGES_KEY, Program, needs_calibration
from quantemu.simulate.plan import BackendPlan, plan_model, typed_options
from quantemu.torch import ops
from quantemu.torch.ranges import MODE_MEANINGS, LearnedRanges, RangeMode
from quantemu.torch.ste import straight_through

_QDQ_TYPES = ("int8", "uint8")  # what ONNX's QuantizeLinear writes (opset 10-18 and on)
# Node inputs that hold trainable weights and biases (by operator: input positions).
TRAINABLE = {"Conv": (1, 2), "ConvTranspose": (1, 2), "Gemm": (1, 2), "MatMul": (0, 1)}


def prepare(
    model,
    backend: str,
    calib=None,
    *,
    observer: str = "minmax",
    calibration: CalibrationRanges | None = None,
    example=None,
    ranges: RangeMode | str = RangeMode.OBSERVED,
    **options: Any,
) -> QatModel:
    """A :class:`QatModel` of ``model`` on ``backend``: the graph and ranges
    ``quantemu.compile(model, backend, calib, ...)`` uses.

    ``model``: an ONNX path, a :class:`~quantemu.graph.Graph`, or a ``torch.nn.Module``, which
    is exported to ONNX first (TorchScript exporter, in eval mode, batch axis symbolic) with
    ``example`` as its input (default: ``calib`` when that is an array); the module's weights are
    copied, and the returned model is the one to train. ``calib``: calibration data (or
    ``calibration``: precomputed ranges); ``ranges``: ``"observed"`` keeps them fixed,
    ``"learned"`` trains their ends (:mod:`quantemu.torch.ranges`); ``options``: the backend's
    lowering options, as for ``quantemu.compile``.
    """
    mode = choose(RangeMode, ranges, "ranges", MODE_MEANINGS)
    typed = typed_options(backend, options)  # parsed once, for the whole plan
    if not needs_calibration(backend, typed):
        raise UnsupportedError(
            f"quantemu.torch: {backend} with options {options} runs a floating-point pipeline "
            "(no quantization grid, no calibrated ranges) that quantization-aware training "
            "has nothing to train against; evaluate it with quantemu.compile, or train for the "
            "integer pipeline (e.g. precision='int8' on nvdla)"
        )
    if isinstance(model, torch.nn.Module):
        model = _from_module(model, calib if example is None else example)
    plan = plan_model(
        model, backend, calib, options=typed, calibration=calibration, observer=observer
    )
    graph = plan.graph
    if graph.quant_overrides:
        raise InvalidInputError(
            f"the model fixes the quantization of {len(graph.quant_overrides)} tensor(s) (a "
            "pre-quantized model: QDQ or int8 TFLite); quantization-aware training starts from "
            "a float model"
        )
    missing = ops.unsupported(graph.nodes)
    if missing:
        raise UnsupportedError(
            f"quantemu.torch: the graph (as {backend} lowers it) has operators without a "
            f"differentiable kernel yet: {', '.join(missing)}; supported: "
            f"{', '.join(sorted(ops.KERNELS))}"
        )
    return QatModel(plan, options, ranges_mode=mode)


def _from_module(module: torch.nn.Module, example) -> Graph:
    """``module`` exported to ONNX (TorchScript exporter) and imported."""
    if example is None or not isinstance(example, (np.ndarray, torch.Tensor)):
        raise InvalidInputError(
            "a torch.nn.Module is exported to ONNX with an example input: pass example=... (a "
            "batch of the model's input), or calib as an array"
        )
    example = torch.as_tensor(np.asarray(example, np.float32))
    was_training = module.training
    buffer = io.BytesIO()
    try:
        module.eval()
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's deprecation notes, not the user's
            torch.onnx.export(
                module,
                (example,),
                buffer,
                input_names=["input"],
                output_names=["output"],
                dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                dynamo=False,
            )
    except Exception as exc:  # the exporter's own errors name the unsupported construct
        raise UnsupportedError(f"torch.onnx.export could not export the module: {exc}") from exc
    finally:
        module.train(was_training)
    return load_onnx(onnx.load_from_string(buffer.getvalue()), name=type(module).__name__)


class QatModel(torch.nn.Module):
    """See the module docstring. ``weight(name)`` is the parameter of graph initializer
    ``name``; ``weight_names`` lists them in graph order."""

    def __init__(
        self,
        plan: BackendPlan,
        options: Mapping | None = None,
        *,
        ranges_mode: RangeMode = RangeMode.OBSERVED,
    ) -> None:
        super().__init__()
        self.plan = plan  # the run's plan: the prepared graph, its ranges, the typed options
        graph, ranges = plan.graph, plan.ranges
        self.graph, self.backend, self.calibrated = graph, plan.backend, ranges
        self.options = dict(options or {})  # as given, for the exported file
        self.learned = LearnedRanges(ranges) if ranges_mode is RangeMode.LEARNED else None
        self.weight_names = _trainable(graph)
        self.params = torch.nn.ParameterList(
            torch.nn.Parameter(torch.from_numpy(np.array(graph.initializers[n], np.float32)))
            for n in self.weight_names
        )
        self._index = {name: i for i, name in enumerate(self.weight_names)}
        self._constants = {
            name: torch.from_numpy(np.array(value))
            for name, value in graph.initializers.items()
            if name not in self._index
        }
        self._lowered: tuple[tuple, Program, CalibrationRanges] | None = None
        self.counters: dict[str, dict[str, int]] = {}

    def weight(self, name: str) -> torch.nn.Parameter:
        """The trainable parameter of graph initializer ``name``."""
        if name not in self._index:
            raise InvalidInputError(
                f"{name!r} is not a trainable weight of this model; weights: "
                f"{', '.join(self.weight_names[:8])}{' ...' if len(self.weight_names) > 8 else ''}"
            )
        return self.params[self._index[name]]

    def trained_graph(self) -> Graph:
        """The graph with the current weights (as ``quantemu.compile`` optimized it)."""
        weights = {
            name: p.detach().cpu().numpy().copy()
            for name, p in zip(self.weight_names, self.params, strict=True)
        }
        return dataclasses.replace(self.graph, initializers={**self.graph.initializers, **weights})

    def export(self, path) -> None:
        """Write an ONNX model that ``quantemu run`` / ``quantemu.compile`` simulate to exactly
        this module's eval outputs: the graph with the current weights, and the ranges as the
        model's ``quantemu.ranges`` property, which win over any calibration when it is read.
        The backend and its options are recorded too (``quantemu.backend``,
        ``quantemu.options``); the file can be simulated on any backend.

        Where the target's scheme is linear, every tensor it stores as per-tensor int8 or uint8
        is also written behind a QuantizeLinear/DequantizeLinear pair with the target's scale
        (as float32) and zero point, so that QDQ tools (onnxruntime, TensorRT, ...) see the
        quantization; quantemu reads the exact ranges and drops the pairs. NNIE's log codes and
        per-channel or wider encodings travel only in the property."""
        metadata = {
            RANGES_KEY: self.ranges.dumps(),
            "quantemu.backend": self.backend,
            "quantemu.options": json.dumps(
                {k: getattr(v, "value", v) for k, v in self.options.items()}, default=str
            ),
        }
        save_onnx(self.trained_graph(), path, metadata, qdq=self._qdq())

    def _qdq(self) -> dict[str, tuple[float, int, str]]:
        """``(scale, zero_point, dtype)`` of every tensor the program stores with a per-tensor
        8-bit linear encoding (read from one run on zeros), for the exported file's Q/DQ pairs;
        empty when the input's shape is not fixed beyond the batch."""
        shape = self.graph.inputs[0].shape[1:]
        if len(self.graph.inputs) != 1 or not all(isinstance(d, int) for d in shape):
            return {}
        probe = np.zeros((1, *shape), np.float32)
        found = {}
        for name, tensor in self.program.run(probe, keep="all").tensors.items():
            enc = tensor.encoding
            if isinstance(enc, LinearEncoding) and enc.axis is None and enc.dtype in _QDQ_TYPES:
                found[name] = (float(enc.scale), int(enc.zero_point), enc.dtype)
        return found

    @property
    def ranges(self) -> CalibrationRanges:
        """The ranges the current program was lowered with: the calibrated ones, or with
        ``ranges="learned"`` the current learned ones."""
        return self._current()[2]

    @property
    def program(self) -> Program:
        """The program lowered from the current weights and ranges (lowered again after any of
        them changes)."""
        return self._current()[1]

    def _current(self) -> tuple[tuple, Program, CalibrationRanges]:
        tracked = [*self.params, *([] if self.learned is None else [self.learned.bounds])]
        version = tuple((id(p), p._version) for p in tracked)
        if self._lowered is None or self._lowered[0] != version:
            ranges = (
                self.calibrated if self.learned is None else self.learned.current(self.calibrated)
            )
            program = self.plan.with_graph(self.trained_graph()).with_ranges(ranges).lower()
            self._lowered = (version, program, ranges)
        return self._lowered

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        _, program, ranges = self._current()
        data = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
        result = program.run(data, keep="all")
        self.counters = {k: dict(v) for k, v in result.counters.items()}
        outputs = self.graph.outputs
        if torch.is_grad_enabled() and any(p.requires_grad for p in self.parameters()):
            values = self._twin(torch.as_tensor(data), result, ranges)
            found = tuple(values[o] for o in outputs)
        else:
            found = tuple(torch.from_numpy(np.array(result.outputs[o])) for o in outputs)
        return found[0] if len(found) == 1 else found

    def float_forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """The float model on the current weights, in torch (no quantization anywhere): the
        baseline that quantization-aware training is compared with, in accuracy and in cost."""
        values = self._twin(torch.as_tensor(x), None, None)
        found = tuple(values[o] for o in self.graph.outputs)
        return found[0] if len(found) == 1 else found

    def _twin(self, x: torch.Tensor, result, ranges) -> dict[str, torch.Tensor]:
        """The float twin, each quantized tensor's value replaced by the exact one of
        ``result`` (the straight-through estimator, :mod:`quantemu.torch.ste`; ``None``: plain
        float)."""
        values: dict[str, torch.Tensor] = {self.graph.inputs[0].name: x.float()}
        for node in self.graph.nodes:
            args = [self._value(name, values) if name else None for name in node.inputs]
            out = ops.kernel(node)(node.attrs, args)
            name = node.outputs[0]
            if result is not None and name in result.tensors:
                tensor = result.tensors[name]
                exact = torch.from_numpy(np.array(tensor.dequantize()))
                out = straight_through(
                    out,
                    exact,
                    ranges.tensors.get(name),
                    logarithmic=tensor.encoding.logarithmic,
                    learned=None if self.learned is None else self.learned.of(name),
                )
            values[name] = out
        return values

    def _value(self, name: str, values: dict) -> torch.Tensor:
        if name in values:
            return values[name]
        if name in self._index:
            return self.params[self._index[name]]
        return self._constants[name]


def _trainable(graph: Graph) -> tuple[str, ...]:
    """Float initializers read as weights or biases, in graph order, each once."""
    names: dict[str, None] = {}
    for node in graph.nodes:
        for position in TRAINABLE.get(node.op_type, ()):
            if position < len(node.inputs):
                name = node.inputs[position]
                value = graph.initializers.get(name)
                if value is not None and np.asarray(value).dtype.kind == "f":
                    names[name] = None
    return tuple(names)
