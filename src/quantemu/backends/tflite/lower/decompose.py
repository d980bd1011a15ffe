"""TensorFlow's converter's own graph rewrites, applied before calibration.

TFLite has no LayerNormalization, HardSigmoid or BatchNormalization kernel. TensorFlow's
converter writes them out of int8 builtins, and every intermediate tensor gets its own
calibrated range, so quantemu rewrites the float graph the same way *before* calibration
(``BackendSpec.prepare``); the rewritten graph's intermediates are then observed like any
other tensor.

- ``LayerNormalization`` (Keras ``LayerNormalization``: ``tf.nn.moments`` then
  ``tf.nn.batch_normalization``), as the converter's int8 model shows it::

      mean = MEAN(x)                    var = MEAN(SQUARED_DIFFERENCE(x, mean))
      inv = RSQRT(ADD(var, epsilon))    s = MUL(inv, gamma)
      y = ADD(MUL(x, s), SUB(beta, MUL(mean, s)))

  over the normalized axes ``axis..rank-1``, keeping dims. Without a bias the converter would
  write a NEG; here ``beta`` is a zero constant instead, which gives the same codes only up to
  SUB's rounding (a documented approximation, rare in exported models).
- ``HardSigmoid(alpha, beta)`` (Keras ``hard_sigmoid``, ``clip(alpha * x + beta, 0, 1)``)::

      y = RELU(MINIMUM(ADD(MUL(x, alpha), beta), 1.0))

  where a convolution alone computes ``x``, the converter folds ``alpha`` and ``beta`` into its
  weights and bias and only MINIMUM and RELU remain (MobileNetV3's squeeze-excite gates).
- A standalone inference ``BatchNormalization`` (one the graph passes could not fold into a
  convolution before it: after an Add, at the input), which the converter lowers
  (``FusedBatchNormV3``: ``m = scale * rsqrt(var + eps)``, constants folded) to::

      y = ADD(MUL(x, m), offset - mean * m)

  with per-channel constant operands, each quantized as any constant operand (its own
  min/max). ``m`` and the offset are computed as the graph's own float kernel computes them
  (:func:`~quantemu.graph.ops.normalize.batchnorm_affine`, ``scale / sqrt(var + eps)``);
  TensorFlow's folded ``rsqrt`` may differ from it by an ulp, which can move a constant's
  code only where it falls on a rounding boundary.

A fused activation the int8 kernels lack (LeakyRelu) is first written back as its own operator
after its producer (:mod:`.unfuse`), as the converter keeps it.

New tensors and nodes are named after the original node (``NAME/mean``, ...); the original
output keeps its name, so reports and overrides still find it.
"""

from __future__ import annotations

import numpy as np

from quantemu.backends.tflite.lower.unfuse import unfuse_activations
from quantemu.graph.ir import Graph, Node
from quantemu.graph.ops.normalize import batchnorm_affine


class _Builder:
    """New nodes and constants replacing one node, named after it."""

    def __init__(self, graph: Graph, node: Node) -> None:
        self.graph, self.prefix = graph, node.name
        self.nodes: list[Node] = []
        self.constants: dict[str, np.ndarray] = {}
        self.replaced: dict[str, Node] = {}  # earlier nodes the rewrite changes

    def const(self, label: str, value) -> str:
        name = f"{self.prefix}/{label}"
        self.constants[name] = np.asarray(value, dtype=np.float32)
        return name

    def op(self, label: str, op_type: str, inputs, output: str | None = None, **attrs) -> str:
        out = output or f"{self.prefix}/{label}"
        self.nodes.append(Node(f"{self.prefix}/{label}", op_type, tuple(inputs), (out,), attrs))
        return out


def _layer_norm(graph: Graph, node: Node) -> _Builder:
    b = _Builder(graph, node)
    x, gamma = node.inputs[0], node.inputs[1]
    rank = graph.tensors[x].rank
    axes = tuple(range(node.attrs["axis"], rank))
    outs = (*node.outputs, "", "")
    mean = b.op("mean", "ReduceMean", (x,), outs[1] or None, axes=axes, keepdims=1)
    sq = b.op("squared_difference", "SquaredDifference", (x, mean))
    var = b.op("variance", "ReduceMean", (sq,), axes=axes, keepdims=1)
    eps = b.const("epsilon", np.float32(node.attrs["epsilon"]))
    shifted = b.op("variance_epsilon", "Add", (var, eps))
    inv = b.op("rsqrt", "Rsqrt", (shifted,), outs[2] or None)
    scaled = b.op("scale", "Mul", (inv, gamma))
    x_scaled = b.op("x_scaled", "Mul", (x, scaled))
    mean_scaled = b.op("mean_scaled", "Mul", (mean, scaled))
    has_bias = len(node.inputs) > 2 and node.inputs[2]
    gshape = np.shape(graph.initializers.get(gamma, np.zeros(1)))
    beta = node.inputs[2] if has_bias else b.const("beta", np.zeros(gshape, np.float32))
    offset = b.op("offset", "Sub", (beta, mean_scaled))
    b.op("output", "Add", (x_scaled, offset), outs[0])
    return b


def _hard_sigmoid(graph: Graph, node: Node) -> _Builder:
    b = _Builder(graph, node)
    one = b.const("one", np.float32(1.0))
    shifted = _folded_affine(graph, node, b)
    if shifted is None:
        alpha = b.const("alpha", np.float32(node.attrs["alpha"]))
        beta = b.const("beta", np.float32(node.attrs["beta"]))
        scaled = b.op("mul", "Mul", (node.inputs[0], alpha))
        shifted = b.op("add", "Add", (scaled, beta))
    capped = b.op("minimum", "Min", (shifted, one))
    b.op("relu", "Relu", (capped,), node.outputs[0])
    return b


def _folded_affine(graph: Graph, node: Node, b: _Builder) -> str | None:
    """The converter folds a multiply and add by constants into the convolution before them
    (its FuseMulOrDivWithConv / FuseAddWithConv patterns, through layout transposes):
    ``alpha * conv(x) + beta`` becomes a convolution with weights ``alpha * W`` and bias
    ``alpha * bias + beta``. Returns the tensor that then holds ``alpha * x + beta``, or None
    where there is no convolution to fold into (a tensor on the way has other readers, or the
    weights are not constants)."""
    tensor = node.inputs[0]
    producer = graph.producer(tensor)
    while producer is not None and producer.op_type in ("Transpose", "Reshape"):
        if len(graph.consumers(tensor)) != 1 or tensor in graph.outputs:
            return None
        tensor = producer.inputs[0]
        producer = graph.producer(tensor)
    if (
        producer is None
        or producer.op_type != "Conv"
        or len(graph.consumers(tensor)) != 1
        or tensor in graph.outputs
        or producer.attrs.get("activation") is not None
        or any(name not in graph.initializers for name in producer.inputs[1:] if name)
    ):
        return None
    alpha, beta = np.float32(node.attrs["alpha"]), np.float32(node.attrs["beta"])
    w = graph.initializers[producer.inputs[1]]
    has_bias = len(producer.inputs) > 2 and producer.inputs[2]
    bias = graph.initializers[producer.inputs[2]] if has_bias else np.zeros(w.shape[0], np.float32)
    weights = b.const("folded_weights", w * alpha)
    folded = b.const("folded_bias", bias * alpha + beta)
    b.replaced[producer.name] = Node(
        producer.name, "Conv", (producer.inputs[0], weights, folded), producer.outputs,
        producer.attrs,
    )  # fmt: skip
    return node.inputs[0]


def _batch_norm(graph: Graph, node: Node) -> _Builder:
    b = _Builder(graph, node)
    stats = (graph.initializers[name] for name in node.inputs[1:5])
    multiplier, offset = batchnorm_affine(*stats, node.attrs["epsilon"])
    # per channel on axis 1 (NC...), broadcast from the right as ONNX's Mul and Add do
    shape = (-1,) + (1,) * (graph.tensors[node.inputs[0]].rank - 2)
    m = b.const("multiplier", multiplier.reshape(shape))
    scaled = b.op("mul", "Mul", (node.inputs[0], m))
    b.op("add", "Add", (scaled, b.const("offset", offset.reshape(shape))), node.outputs[0])
    return b


_REWRITES = {
    "LayerNormalization": _layer_norm,
    "HardSigmoid": _hard_sigmoid,
    "BatchNormalization": _batch_norm,
}


def decompose_for_tf_converter(graph: Graph) -> Graph:
    """``graph`` with every LayerNormalization, HardSigmoid and standalone BatchNormalization
    written out of the int8 builtins TensorFlow's converter uses, and fused activations TFLite
    cannot fuse as their own operators (module docstring); the same graph when there are
    none."""
    graph = unfuse_activations(graph)
    if not any(n.op_type in _REWRITES for n in graph.nodes):
        return graph
    nodes: list[Node] = []
    constants: dict[str, np.ndarray] = {}
    for node in graph.nodes:
        rewrite = _REWRITES.get(node.op_type)
        if rewrite is None or (node.op_type in _CONSTANT_PARAMS and not _gamma_ok(graph, node)):
            nodes.append(node)
            continue
        built = rewrite(graph, node)
        nodes = [built.replaced.get(n.name, n) for n in nodes]
        nodes.extend(built.nodes)
        constants.update(built.constants)
    return graph.replace(nodes=tuple(nodes), initializers={**graph.initializers, **constants})


#: Rewritten only when every parameter input is a constant.
_CONSTANT_PARAMS = ("LayerNormalization", "BatchNormalization")


def _gamma_ok(graph: Graph, node: Node) -> bool:
    """Only constant parameters are written out: the converter folds nothing else, and a
    LayerNormalization or BatchNormalization with computed parameters stays as it is (and is
    refused, naming it)."""
    return all(name in graph.initializers for name in node.inputs[1:] if name)
