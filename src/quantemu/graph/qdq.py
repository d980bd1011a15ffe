"""Importing QDQ models: QuantizeLinear/DequantizeLinear pairs become quantization overrides.

A QDQ model (onnxruntime's ``QuantFormat.QDQ``, TensorRT-style explicit quantization) marks every
quantized tensor with a pair ``x -> QuantizeLinear(s, z) -> DequantizeLinear(s, z) -> x'`` and
stores quantized weights as integer initializers behind a lone ``DequantizeLinear``. The float
graph quantemu builds from it is the model *without* fake quantization:

- each Q/DQ pair ``x -> Q -> DQ -> x'`` is replaced by ``x' = Clip(x, lo, hi)``, the
  saturation the pair performs without its rounding: ``lo = (qmin - z) * s`` and
  ``hi = (qmax - z) * s`` over the integer type's range, in float32. The clamp matters:
  quantization tools drop a ReLU (or ReLU6) in front of a pair whose range starts (ends) there,
  because the saturation does its work; without the clamp the float graph would not compute the
  same function. The pair's scale and zero point become ``graph.quant_overrides[x']``, the tensor
  its readers read (after ``fuse_activation`` the clamp is usually the producer's activation);
  other DequantizeLinear nodes of the same QuantizeLinear are read as ``x'`` too. A per-axis
  activation pair, whose bounds differ by channel, is removed without a clamp and its override
  put on ``x``;
- each ``DequantizeLinear`` of a constant becomes a float32 initializer holding the dequantized
  values ``(q - z) * s`` (computed as onnxruntime does: the integer difference converted to
  float32, times the float32 scale); ``graph.quant_overrides`` keeps the scale, zero point and
  the original integers (``values``) under the initializer's name.

Scales and zero points are kept exactly: NumPy arrays of the file's dtypes and shapes. Anything
else (a Q whose output is read by something other than a matching DQ, a DQ of a run-time integer
tensor such as a quantized graph input, blocked quantization) is an :class:`UnsupportedError`.
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import QuantOverride
from quantemu.graph.onnx_attrs import RawNode

QUANTIZE, DEQUANTIZE = "QuantizeLinear", "DequantizeLinear"
_INT_DTYPES = ("int8", "uint8", "int16", "uint16", "int32")


def _params(raw: RawNode, consts: dict[str, np.ndarray], default_zero: np.dtype):
    raw.check_attrs({"axis", "block_size", "output_dtype", "saturate"})
    if int(raw.attrs.get("block_size", 0)):
        raise UnsupportedError(f"{raw}: blocked quantization (block_size) is not supported")
    for index, role in ((1, "scale"), (2, "zero point")):
        if index < len(raw.inputs) and raw.inputs[index] and raw.inputs[index] not in consts:
            raise UnsupportedError(f"{raw}: the {role} must be a constant (initializer)")
    scale = consts[raw.inputs[1]] if len(raw.inputs) > 1 and raw.inputs[1] else None
    if scale is None:
        raise InvalidInputError(f"{raw}: the scale input is required")
    zp_name = raw.inputs[2] if len(raw.inputs) > 2 else ""
    zero = consts[zp_name] if zp_name else np.zeros(scale.shape, dtype=default_zero)
    if zero.dtype.name not in _INT_DTYPES:
        raise UnsupportedError(
            f"{raw}: quantized type {zero.dtype.name} is not supported; "
            f"supported: {', '.join(_INT_DTYPES)}"
        )
    # onnxruntime's quantizer writes a bias's per-tensor scale as shape (1,) beside a scalar
    # zero point; one value each is per tensor whatever the shapes (onnxruntime runs it so)
    if zero.shape != scale.shape and not zero.size == scale.size == 1:
        raise InvalidInputError(
            f"{raw}: zero point shape {zero.shape} != scale shape {scale.shape}"
        )
    per_axis = scale.ndim == 1 and scale.size > 1
    axis = int(raw.attrs.get("axis", 1)) if per_axis else None
    return QuantOverride(scale, zero, axis, source=raw.name)


def _q_dtype(raw: RawNode) -> np.dtype:
    """The zero point dtype when omitted: uint8, or Q's ``output_dtype`` (opset 21)."""
    code = int(raw.attrs.get("output_dtype", 0))
    return np.dtype(helper.tensor_dtype_to_np_dtype(code)) if code else np.dtype(np.uint8)


def _dequantize_constant(raw: RawNode, values: np.ndarray, params: QuantOverride) -> np.ndarray:
    if values.dtype.name not in _INT_DTYPES or values.dtype != params.zero_point.dtype:
        raise UnsupportedError(
            f"{raw}: cannot dequantize a {values.dtype.name} constant with a "
            f"{params.zero_point.dtype.name} zero point"
        )
    scale, zero = params.scale, params.zero_point
    if params.axis is not None:
        axis = params.axis % values.ndim
        if values.shape[axis] != scale.size:
            raise InvalidInputError(
                f"{raw}: {scale.size} scales for axis {axis} of a constant of shape {values.shape}"
            )
        shape = [1] * values.ndim
        shape[axis] = -1
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    diff = values.astype(np.int64) - zero.astype(np.int64)
    return (diff.astype(np.float32) * scale.astype(np.float32)).astype(np.float32)


def drop_qdq_pairs(nodes: list[RawNode]) -> list[RawNode]:
    """The nodes without their QuantizeLinear -> DequantizeLinear pairs, each pair's output read
    as its input: for a file whose quantization quantemu records otherwise (its own export,
    ``quantemu.ranges``). A Q/DQ node outside such a pair is an error."""
    produced = {n.outputs[0]: n for n in nodes if n.op_type == QUANTIZE}
    alias: dict[str, str] = {}
    for node in nodes:
        if node.op_type == DEQUANTIZE:
            source = produced.get(node.inputs[0])
            if source is None:
                raise InvalidInputError(
                    f"{node}: a DequantizeLinear that does not read a QuantizeLinear, in a file "
                    "with quantemu.ranges; re-export the model (QatModel.export)"
                )
            alias[node.outputs[0]] = source.inputs[0]
    paired = set(alias) | {n.outputs[0] for n in produced.values()}
    kept = []
    for node in nodes:
        if node.op_type in (QUANTIZE, DEQUANTIZE):
            if node.outputs[0] not in paired:
                raise InvalidInputError(f"{node}: unpaired in a file with quantemu.ranges")
            continue
        node.inputs = tuple(alias.get(name, name) for name in node.inputs)
        kept.append(node)
    return kept


def remove_qdq(
    nodes: list[RawNode], consts: dict[str, np.ndarray], outputs: list[str], opset: int
) -> tuple[list[RawNode], dict[str, QuantOverride]]:
    """Remove Q/DQ nodes; returns ``(nodes, overrides)`` and updates ``consts`` in place.

    Graph outputs produced by a removed DQ are kept by an ``Identity`` from the float tensor.
    """
    return _Remover(nodes, consts, outputs, opset).run()


class _Remover:
    """The state of one Q/DQ removal: readers of each tensor, aliases, overrides, clamps."""

    def __init__(self, nodes, consts, outputs, opset) -> None:
        self.nodes, self.consts, self.outputs, self.opset = nodes, consts, outputs, opset
        self.overrides: dict[str, QuantOverride] = {}
        self.alias: dict[str, str] = {}
        self.drop: set[int] = set()
        self.clamps: dict[int, RawNode] = {}
        self.readers: dict[str, list[RawNode]] = {}
        for node in nodes:
            for name in node.inputs:
                self.readers.setdefault(name, []).append(node)

    def run(self) -> tuple[list[RawNode], dict[str, QuantOverride]]:
        quantize_outputs = {n.outputs[0] for n in self.nodes if n.op_type == QUANTIZE}
        for node in self.nodes:
            if node.op_type == DEQUANTIZE:
                self._dequantize(node, quantize_outputs)
        for node in self.nodes:
            if node.op_type == QUANTIZE:
                self._pair(node)
        # Each QuantizeLinear is replaced by its clamp (if any), in place: the order stays valid.
        kept = [
            self.clamps.get(id(n), n)
            for n in self.nodes
            if id(n) in self.clamps or (id(n) not in self.drop and n.op_type != QUANTIZE)
        ]
        for node in kept:
            node.inputs = tuple(_resolve(self.alias, name) for name in node.inputs)
        for name in self.outputs:
            if name in self.alias:
                source = (_resolve(self.alias, name),)
                kept.append(RawNode(f"{name}/dequantized", "Identity", "", source, (name,)))
        return kept, self.overrides

    def _dequantize(self, node: RawNode, quantize_outputs: set[str]) -> None:
        source = node.inputs[0]
        if source in self.consts:
            values = self.consts[source]
            params = _params(node, self.consts, values.dtype)
            self.consts[node.outputs[0]] = _dequantize_constant(node, values, params)
            _record(self.overrides, node.outputs[0], _with_values(params, values))
            self.drop.add(id(node))
        elif source not in quantize_outputs:
            raise UnsupportedError(
                f"{node}: reads {source!r}, which is neither a constant nor the output of a "
                "QuantizeLinear; quantemu imports QDQ models whose run-time quantized tensors "
                "all sit inside QuantizeLinear/DequantizeLinear pairs (float inputs/outputs)"
            )

    def _pair(self, node: RawNode) -> None:
        source, quantized = node.inputs[0], node.outputs[0]
        params = _params(node, self.consts, _q_dtype(node))
        users = self.readers.get(quantized, [])
        if quantized in self.outputs or not users or any(u.op_type != DEQUANTIZE for u in users):
            others = sorted({str(u) for u in users if u.op_type != DEQUANTIZE})
            raise UnsupportedError(
                f"{node}: its quantized output {quantized!r} is used by "
                f"{', '.join(others) or 'a graph output'}; quantemu imports QuantizeLinear only "
                "when every use is a matching DequantizeLinear"
            )
        for user in users:
            if not params.same_parameters(_params(user, self.consts, params.zero_point.dtype)):
                raise UnsupportedError(
                    f"{user}: its scale/zero point/axis differ from those of {node}; quantemu "
                    "imports matching QuantizeLinear/DequantizeLinear pairs only"
                )
        self.drop.update(id(u) for u in users)
        if params.per_axis:
            for user in users:
                self.alias[user.outputs[0]] = source
            _record(self.overrides, source, params)
            return
        target = users[0].outputs[0]
        for user in users[1:]:
            self.alias[user.outputs[0]] = target
        _record(self.overrides, target, params)
        self.clamps[id(node)] = self._clamp(node, source, target, params)

    def _clamp(self, node: RawNode, source: str, target: str, params: QuantOverride) -> RawNode:
        """``target = Clip(source, lo, hi)``: the pair's saturation bounds (module docstring)."""
        info = np.iinfo(params.zero_point.dtype)
        zero = np.float32(params.zero_point.reshape(-1)[0])
        scale = np.float32(params.scale.reshape(-1)[0])
        low = (np.float32(info.min) - zero) * scale
        high = (np.float32(info.max) - zero) * scale
        name = f"{node.name}/saturate"
        if self.opset < 11:
            attrs = {"min": float(low), "max": float(high)}
            return RawNode(name, "Clip", "", (source,), (target,), attrs)
        self.consts[f"{name}/min"] = np.array(low, dtype=np.float32)
        self.consts[f"{name}/max"] = np.array(high, dtype=np.float32)
        return RawNode(name, "Clip", "", (source, f"{name}/min", f"{name}/max"), (target,))


def _with_values(params: QuantOverride, values: np.ndarray) -> QuantOverride:
    return QuantOverride(params.scale, params.zero_point, params.axis, values, params.source)


def _record(overrides: dict[str, QuantOverride], name: str, params: QuantOverride) -> None:
    previous = overrides.get(name)
    if previous is not None and not previous.same_parameters(params):
        raise UnsupportedError(
            f"tensor {name!r} is quantized twice with different parameters ({previous.source} "
            f"and {params.source}); quantemu keeps one set of parameters per tensor"
        )
    overrides[name] = params


def _resolve(alias: dict[str, str], name: str) -> str:
    seen = 0
    while name in alias and seen < len(alias) + 1:
        name, seen = alias[name], seen + 1
    return name
