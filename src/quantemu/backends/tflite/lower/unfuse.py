"""Fused activations TFLite's int8 kernels lack, written back as their own operators.

The graph passes record an activation on its producer (``fuse_activation``: attribute
``activation``). TFLite's int8 kernels fuse only RELU, RELU6 and RELU_N1_TO_1 (a clamp of the
output codes, ``kernels/kernel_util.cc: CalculateActivationRangeQuantized``); TensorFlow's
converter keeps any other activation as its own operator after the producer: a Keras
``Conv2D`` followed by ``LeakyReLU`` is CONV_2D then LEAKY_RELU, the convolution's output
quantized on its own calibrated range. :func:`unfuse_activations` gives that graph back *before*
calibration (``BackendSpec.prepare``), so the producer's pre-activation output is a tensor of
its own that the calibrator observes, as TensorFlow's calibrator observes the convolution's
output.

The pre-activation tensor is named ``NODE/pre_activation`` and the activation node
``NODE/leaky_relu`` (``NODE`` the producer); the activation keeps the fused node's output name,
so reports and overrides still find it.
"""

from __future__ import annotations

from quantemu.graph.ir import Graph, Node

#: Fused activations the int8 kernels cannot apply: attribute value -> (op type, its attrs
#: from the fused node's attrs).
_SEPARATE = {
    "leaky_relu": ("LeakyRelu", lambda attrs: {"alpha": attrs["activation_alpha"]}),
}
#: The attributes ``fuse_activation`` adds to the producer.
_FUSED_KEYS = ("activation", "activation_alpha", "activation_min", "activation_max")


def _split(node: Node) -> tuple[Node, Node]:
    """``node`` without its fused activation, and the activation node after it."""
    kind = node.attrs["activation"]
    op_type, attrs_of = _SEPARATE[kind]
    pre = f"{node.name}/pre_activation"
    bare = node.attrs.merged(**dict.fromkeys(_FUSED_KEYS))
    producer = Node(node.name, node.op_type, node.inputs, (pre,), bare)
    activation = Node(f"{node.name}/{kind}", op_type, (pre,), node.outputs, attrs_of(node.attrs))
    return producer, activation


def unfuse_activations(graph: Graph) -> Graph:
    """``graph`` with every fused activation TFLite cannot fuse as a node of its own after its
    producer (module docstring); the same graph when there are none."""
    if not any(n.attrs.get("activation") in _SEPARATE for n in graph.nodes):
        return graph
    nodes: list[Node] = []
    for node in graph.nodes:
        nodes.extend(_split(node) if node.attrs.get("activation") in _SEPARATE else (node,))
    return graph.replace(nodes=tuple(nodes))
