"""The onednn lowering context: PyTorch's activation qparams for every tensor, and the layer base.

:func:`assign_encodings` runs before any rule: PyTorch's scheme fixes every activation's
``quint8`` qparams from calibration (or a QDQ file's overrides) and the ops that keep their
input's qparams, so the rules only read them (:attr:`Context.encodings`).

- activations: ``quint8`` per tensor, affine; ``(scale, zero_point)`` of PyTorch's observers
  from the calibrated ``(min, max)`` (:func:`..quantize.activation_qparams`, ``reduce_range``
  as the ``x86`` qconfig sets it, or not as the ``onednn`` qconfig does); the input is quantized
  by ``torch.quantize_per_tensor``'s arithmetic (:class:`..aten.TorchU8Encoding`);
- pools, ReLU, Clip and reshapes keep their input's qparams, as PyTorch's quantized ops do;
- a Mul by a constant scalar ``c`` is ``quantized::mul`` (scalar): the codes stay (``c < 0``:
  ``255 - q``) and the qparams become ``(|c|·s, zp)`` (``(|c|·s, 255 - zp)``; ``(1, 0)`` for
  ``c = 0``), the product in binary64 as ATen's ``_mul_scalar_out`` takes it
  (:func:`mul_scalar_encoding`);
- an LSTM/GRU's output takes the ``(1 / scale, shift)`` of its u8 states (:mod:`.rnn_qparams`);
- HardSigmoid's output takes the fixed ``(1/256, 0)`` of PyTorch's ``quantized::hardsigmoid``
  (the x86 qconfig mapping's fixed-qparams observer for ``nn.Hardsigmoid``);
- a QDQ model's ``quant_overrides`` replace calibration (s8 activations become u8 with the zero
  point shifted by 128: the same real values); a Q/DQ pair's saturating Clip hands its override
  to the tensor it clamps, so that the producer writes the pair's codes directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np

from quantemu.backends.onednn.aten import TorchU8Encoding
from quantemu.backends.onednn.hard_ops import HARDSIGMOID_QPARAMS
from quantemu.backends.onednn.lower.options import Fallback, Options
from quantemu.backends.onednn.lower.rnn_qparams import (
    RECURRENT_OPS,
    rnn_data_qparams,
    rnn_output_encoding,
)
from quantemu.backends.onednn.quantize import activation_qparams
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Graph, Node
from quantemu.program import Layer
from quantemu.program.lowering import LoweringContext, NotLowerable

# Ops whose PyTorch quantized kernels keep the input's scale and zero point.
KEEPS_QPARAMS = frozenset(
    {"MaxPool", "AveragePool", "GlobalAveragePool", "Relu", "Clip", "Flatten", "Reshape"}
    | {"Transpose", "Identity", "Dropout", "Squeeze", "Unsqueeze", "Gather", "Slice", "Expand"}
)
# Of those, the ones whose kernel can also requantize to other output qparams.
REQUANTIZING_POOLS = frozenset({"AveragePool", "GlobalAveragePool"})


@dataclass(frozen=True, eq=False, kw_only=True)
class U8Layer(Layer):
    """A onednn layer: the framework's fields and its output's ``quint8`` encoding."""

    encoding: TorchU8Encoding  # of the output tensor


L = TypeVar("L", bound=Layer)


@dataclass
class Context(LoweringContext):
    """The framework's context with every tensor's :class:`TorchU8Encoding` assigned up front."""

    backend: ClassVar[str] = "onednn"

    options: Options

    @classmethod
    def create(cls, graph: Graph, ranges: Mapping[str, Any], options: Options) -> Context:
        """The context of ``graph`` with :func:`assign_encodings` done."""
        return cls(graph, ranges, options, dict(assign_encodings(graph, ranges, options)))

    def layer(self, cls: type[L], node: Node, /, **kwargs: Any) -> L:
        """The framework's :meth:`~LoweringContext.layer`, with the output's encoding."""
        kwargs.setdefault("encoding", self.encodings[node.outputs[0]])
        return super().layer(cls, node, **kwargs)

    def activation(self, node: Node, index: int = 0) -> str:
        """Name of the run-time tensor at input ``index`` (not an initializer)."""
        name = node.inputs[index]
        if name in self.graph.initializers:
            raise NotLowerable(f"input {index} ({name}) is a constant, not an activation")
        return name

    def allows_fallback(self) -> bool:
        return self.options.fallback is Fallback.FLOAT


def assign_encodings(
    graph: Graph, ranges: Mapping[str, Any], opts: Options
) -> dict[str, TorchU8Encoding]:
    """The ``quint8`` qparams of every activation tensor, in graph order (module docstring)."""
    adopted = _adopted_overrides(graph)
    enc: dict[str, TorchU8Encoding] = {}

    def from_data(name: str) -> TorchU8Encoding:
        if name in graph.quant_overrides:
            return _override_encoding(graph, name)
        if name in adopted:
            return _override_encoding(graph, adopted[name])
        return _range_encoding(ranges, name, opts.reduce_range)

    for info in graph.inputs:
        enc[info.name] = from_data(info.name)
    for node in graph.nodes:
        out = node.outputs[0]
        source = node.inputs[0] if node.inputs else ""
        factor = scalar_factor(graph, node)
        given = out in graph.quant_overrides or out in adopted
        # The factor's activation has no encoding when an opaque node (an Unsupported one, in
        # a lenient import's support table) made it: then this is no scalar product of it.
        known = factor is not None and factor[0] in enc
        scaled = mul_scalar_encoding(enc[factor[0]], factor[1]) if known and not given else None
        if scaled is not None:
            enc[out] = scaled
        elif node.op_type in RECURRENT_OPS:
            enc[out] = rnn_output_encoding(*rnn_data_qparams(node, ranges, opts))
        elif node.op_type == "HardSigmoid" and not given:
            enc[out] = TorchU8Encoding(*HARDSIGMOID_QPARAMS)
        elif node.op_type in KEEPS_QPARAMS and source in enc:
            enc[out] = enc[source]
            if given and not (mine := from_data(out)).same_params(enc[source]):
                if node.op_type not in REQUANTIZING_POOLS:
                    raise UnsupportedError(
                        f"node {node.name!r} ({node.op_type}): the file quantizes its output "
                        f"{out!r} as {mine.describe()} but its input {source!r} as "
                        f"{enc[source].describe()}; PyTorch's quantized {node.op_type} keeps "
                        "its input's scale and zero point: give both the same"
                    )
                enc[out] = mine
        else:
            enc[out] = from_data(out)
    return enc


def scalar_factor(graph: Graph, node: Node) -> tuple[str, float] | None:
    """``(activation, c)`` when ``node`` multiplies one activation by a finite constant scalar
    ``c`` (no fused activation): PyTorch's ``quantized::mul`` with a Scalar operand."""
    if node.op_type != "Mul" or len(node.inputs) != 2 or node.attrs.get("activation"):
        return None
    consts = [i for i in node.inputs if i in graph.initializers]
    if len(consts) != 1:
        return None
    c = np.asarray(graph.initializers[consts[0]])
    if c.size != 1 or not np.isfinite(c).all():
        return None
    # The exported constant is binary32: PyTorch's own Python float may differ in the last bits.
    x = next(i for i in node.inputs if i != consts[0])
    return x, float(c.reshape(()))


def mul_scalar_encoding(enc: TorchU8Encoding, c: float) -> TorchU8Encoding | None:
    """The output qparams of ATen's ``quantized::mul(x, c)``: ``|c|·s`` in binary64 (rounded
    to binary32 where the kernels read it), the zero point kept, mirrored for ``c < 0``; None
    where ``|c|·s`` is no usable binary32 scale (the Mul stays a float fallback)."""
    if c == 0.0:
        return TorchU8Encoding(1.0, 0)
    with np.errstate(over="ignore", under="ignore"):
        scale = np.float32(abs(c) * enc.scale)
    if not 0 < scale < np.inf:
        return None
    return TorchU8Encoding(abs(c) * enc.scale, enc.zp if c > 0 else 255 - enc.zp)


def _adopted_overrides(graph: Graph) -> dict[str, str]:
    """Tensor -> the overridden tensor whose qparams it takes: a Q/DQ pair's saturating Clip.

    ``x -> Clip -> x'`` with an override on ``x'`` only, ``x`` read by that Clip alone: PyTorch
    would have quantized ``x`` itself with those qparams, so ``x`` takes them and the Clip
    becomes a no-op clamp on the codes.
    """
    adopted = {}
    for node in graph.nodes:
        if node.op_type != "Clip" or node.outputs[0] not in graph.quant_overrides:
            continue
        x = node.inputs[0]
        if x not in graph.quant_overrides and len(graph.consumers(x)) == 1:
            adopted[x] = node.outputs[0]
    return adopted


def _override_encoding(graph: Graph, name: str) -> TorchU8Encoding:
    ov = graph.quant_overrides[name]
    scale, zero = np.asarray(ov.scale), np.asarray(ov.zero_point)
    if scale.size != 1 or ov.axis is not None:
        raise UnsupportedError(
            f"tensor {name!r} is quantized per axis in the file; PyTorch's x86 scheme quantizes "
            "activations per tensor"
        )
    shift = {"uint8": 0, "int8": 128}.get(zero.dtype.name)
    if shift is None:
        raise UnsupportedError(
            f"tensor {name!r} is quantized as {zero.dtype.name} in the file; activations here "
            "are u8 (an s8 tensor is taken as u8 with zero point + 128)"
        )
    return TorchU8Encoding(float(np.float32(scale.reshape(()))), int(zero.reshape(())) + shift)


def _range_encoding(ranges: Mapping[str, Any], name: str, reduce_range: bool) -> TorchU8Encoding:
    if name not in ranges:
        raise InvalidInputError(
            f"no calibrated range for tensor {name!r}; calibrate the graph being lowered "
            "(quantemu.calibrate(optimize(graph), data)) or give the tensor a QDQ override"
        )
    lo, hi = ranges[name]
    lo, hi = float(np.min(lo)), float(np.max(hi))  # a per-channel range: its envelope
    scale, zero_point = activation_qparams(lo, hi, reduce_range=reduce_range)
    return TorchU8Encoding(scale, zero_point)
