"""One lowered layer: a template method that checks what goes in and what comes out.

A backend's lowering turns each graph node into a :class:`Layer`. A layer reads the
:class:`~quantemu.program.encoding.QTensor` of its input tensors and returns the QTensor of its
output, computed with the backend's exact operators, plus the counters the target keeps
(accumulator saturation, output saturation, pair saturation, LUT under/overflow...).

:meth:`Layer.run` is the template method, in the manner of ``onnx.reference``'s ``OpRun.run``:
it checks the inputs, calls the subclass's :meth:`Layer.compute`, checks the output's dtype,
shape and code range against its encoding, and wraps any exception with the layer's name, op
and backend. A subclass implements only :meth:`Layer.compute`.

A layer that does not run the target's bit-exact arithmetic (a float fallback the vendor's
toolchain would also make, or an integer kernel quantemu approximates) says so with
``exact=False`` and a ``note``; reports show it.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from quantemu.errors import InvalidInputError, QuantemuError
from quantemu.program.encoding import QTensor


class LayerError(QuantemuError, RuntimeError):
    """A layer failed or produced output its encoding cannot hold; names layer, op, backend."""


@dataclass(frozen=True)
class LayerOutput:
    """What one layer call produced: its output tensor and its counters (name -> count)."""

    tensor: QTensor
    counters: Mapping[str, int] = field(default_factory=dict)
    # Integer intermediates worth inspecting (e.g. "acc": the int32 accumulators), optional.
    internals: Mapping[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Layer(abc.ABC):
    """One lowered graph node. Subclasses are frozen, keyword-only dataclasses that add their
    precomputed parameters to these fields and implement :meth:`compute`."""

    name: str  # the graph node's name
    op: str  # what runs on the target, e.g. "conv2d_deep", "sdp", "float:Softmax"
    inputs: tuple[str, ...]  # names of the graph tensors it reads (graph inputs or outputs)
    output: str  # the graph tensor it produces
    # Required, without defaults: every layer states whether it is the target's bit-exact
    # arithmetic (a default would also leak into subclasses that redeclare the field).
    exact: bool
    note: str  # why not exact / what fell back / anything a report should say ("" if nothing)
    backend: str = ""  # the backend that lowered it, for error messages (set by the context)
    # A recurrent layer's time axis in its output: the error is also reported per time step.
    step_axis: int | None = None

    def run(self, inputs: Sequence[QTensor]) -> LayerOutput:
        """Compute the layer on a batch (inputs in ``self.inputs`` order, batch first).

        Raises :class:`LayerError` (or the original :class:`~quantemu.errors.QuantemuError`
        subclass, its message prefixed with where it happened) when the layer fails, and
        :class:`LayerError` when its output does not fit its encoding.
        """
        self._check_inputs(inputs)
        try:
            out = self.compute(list(inputs))
        except QuantemuError as exc:
            raise _rewrapped(exc, self.where()) from exc
        except MemoryError:
            raise  # the machine's limit, not a bug: its own message says so
        except Exception as exc:
            raise LayerError(
                f"{self.where()}: {type(exc).__name__}: {exc} (a quantemu bug: please report it "
                "with the model)"
            ) from exc
        self._check_output(out)
        return out

    @abc.abstractmethod
    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The layer's arithmetic; :meth:`run` calls it with checked inputs."""

    def where(self) -> str:
        """``layer 'conv1' (conv2d_deep, xs3)``: the prefix of every error this layer raises."""
        detail = f"{self.op}, {self.backend}" if self.backend else self.op
        return f"layer {self.name!r} ({detail})"

    def _check_inputs(self, inputs: Sequence[QTensor]) -> None:
        if len(inputs) != len(self.inputs):
            raise InvalidInputError(
                f"{self.where()}: got {len(inputs)} inputs, it reads {len(self.inputs)} "
                f"({', '.join(self.inputs)})"
            )
        for name, tensor in zip(self.inputs, inputs, strict=True):
            if not isinstance(tensor, QTensor):
                raise InvalidInputError(
                    f"{self.where()}: input {name!r} is a {type(tensor).__name__}, not a QTensor "
                    "(codes with their encoding)"
                )

    def _check_output(self, out: object) -> None:
        if not isinstance(out, LayerOutput) or not isinstance(out.tensor, QTensor):
            raise LayerError(f"{self.where()}: compute() returned {type(out).__name__}")
        # Dtype, range and per-channel shape; the layout against the float model is checked
        # where both are at hand (simulate.evaluate).
        problem = out.tensor.encoding.check_codes(out.tensor.codes)
        if problem is not None:
            raise LayerError(f"{self.where()}: output {self.output!r}: {problem}")


def _rewrapped(exc: QuantemuError, where: str) -> QuantemuError:
    """``exc`` with ``where`` in front of its message, same class where it can be rebuilt."""
    message = f"{where}: {exc}"
    try:
        return type(exc)(message)
    except TypeError:  # an exception class with a different constructor
        return LayerError(message)
