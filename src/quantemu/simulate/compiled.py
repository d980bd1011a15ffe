"""A compiled program: a plan and the lowered program the backend made of it.

:class:`Program` is what ``quantemu.compile`` returns: ``run`` runs the integer program on a
batch (or a dataset, in batches side by side on the cores), ``evaluate`` compares it layer by
layer with the float model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from quantemu._version import __version__
from quantemu.calibration.feeds import FeedSamples
from quantemu.calibration.from_model import FROM_MODEL
from quantemu.calibration.ranges import NO_CALIBRATION
from quantemu.errors import InvalidInputError, choose
from quantemu.graph import inputs
from quantemu.graph.passes_shape import fixed_batch
from quantemu.program import LinearEncoding, LoweredModel, QTensor, RunResult, run_lowered
from quantemu.simulate.evaluate import Evaluation, evaluate
from quantemu.simulate.streaming import KEEP_MEANINGS, Keep, elements_per_sample, run_in_batches

if TYPE_CHECKING:
    from quantemu.simulate.plan import BackendPlan

#: ``Graph.metadata`` key of ranges written with the model (``QatModel.export``).
RANGES_KEY = "quantemu.ranges"


def _from_plan(name: str, doc: str) -> property:
    """A read-only attribute of the program that is its plan's ``name``."""
    return property(lambda self: getattr(self.plan, name), doc=doc)


@dataclass(frozen=True)
class Program:
    """A float model lowered onto one backend (see the module docstring): its
    :class:`~quantemu.simulate.plan.BackendPlan` and the lowered program it gave."""

    plan: BackendPlan
    lowered: LoweredModel

    backend = _from_plan("backend", "The backend's name.")
    graph = _from_plan("graph", "The optimized graph as the backend's toolchain rewrote it.")
    ranges = _from_plan("ranges", "The activation ranges the program was lowered with.")
    options = _from_plan("options", "The backend's typed lowering options.")

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

    def check_input(self, x) -> np.ndarray | FeedSamples:
        """``x`` as the batch the model's single input takes, or a clear error; a dict
        ``{input name: array}`` (for any model; needed for one with several inputs) as
        :class:`~quantemu.calibration.feeds.FeedSamples`, batched per input.

        Float data is returned as float32. Integer data must be the model's own input codes (a
        pre-quantized model's input dtype, e.g. int8) and is returned as it is.
        """
        if isinstance(x, Mapping | FeedSamples) or len(self.graph.inputs) != 1:
            return FeedSamples(self.graph, x)
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

    def float_input(self, x: np.ndarray | FeedSamples) -> np.ndarray | dict:
        """The float values of a checked batch (integer codes are dequantized)."""
        if isinstance(x, FeedSamples):
            return x.arrays
        if x.dtype.kind in "iu":
            return self._input_encoding(x.dtype).dequantize(x).astype(np.float32)
        return x

    def run(self, x, *, keep: Keep | str = "outputs") -> RunResult:
        """Run ``x`` (any number of samples; a dict ``{input name: array}`` for a model with
        several inputs, :meth:`check_input`) through the integer program.

        ``keep="outputs"``: the graph outputs' codes and every layer's counters, computed in
        batches side by side on the cores (bounded memory); ``keep="all"``: every layer's
        tensors too, in one pass, up to a size limit; ``keep="internals"``: also every layer's
        internals (accumulators, ...) (:mod:`quantemu.simulate.streaming`).
        """
        keep = choose(Keep, keep, "keep", KEEP_MEANINGS)
        x = self.check_input(x)
        feeds = self._feeder(x)

        def run_batch(batch: np.ndarray | FeedSamples) -> RunResult:
            return run_lowered(
                self.lowered, self.graph.outputs, feeds(batch), internals=keep is Keep.INTERNALS
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
            once=self.once_layers(x),
        )

    def once_layers(self, x) -> frozenset[str]:
        """The layers that compute the same thing for every batch of ``x``: with feeds whose
        inputs without a batch reach a layer of fixed output shape (``b * 0.5`` of a
        fixed-shape ``b``), that layer runs once per batch, but counts once per run."""
        if not isinstance(x, FeedSamples) or None not in x.axes.values():
            return frozenset()
        tensors = self.graph.tensors
        return frozenset(
            layer.name
            for layer in self.lowered.layers
            if all(isinstance(d, int) for d in tensors[layer.output].shape)
        )

    def _feeder(self, x: np.ndarray | FeedSamples):
        """``feeds(batch)``: a checked batch of ``x`` as ``run_lowered``'s feeds (integer codes
        with the model's own input quantization)."""
        if isinstance(x, FeedSamples):
            return lambda batch: batch.arrays
        encoding = self._input_encoding(x.dtype) if x.dtype.kind in "iu" else None
        name = self.graph.inputs[0].name
        if encoding is None:
            return lambda batch: {name: batch}
        return lambda batch: {name: QTensor(batch, encoding)}

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
