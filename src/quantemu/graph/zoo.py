"""Reference models built with ``onnx.helper``: random weights, real architectures.

:func:`resnet18` is the ResNet-18-shaped model the benchmarks and tests use (the torchvision
layer structure: 7x7/2 stem, 3x3/2 max pool, four stages of two basic blocks with 1x1/2
projection shortcuts, global average pool, fully connected layer).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    """Accumulates nodes and initializers; names are unique and readable."""

    def __init__(self, seed: int, batchnorm: bool) -> None:
        self.rng = np.random.default_rng(seed)
        self.batchnorm = batchnorm
        self.nodes: list[Any] = []
        self.inits: list[Any] = []

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def conv(self, x: str, cin: int, cout: int, k: int, *, stride: int, name: str) -> str:
        w = self.rng.normal(0, np.sqrt(2 / (cin * k * k)), (cout, cin, k, k)).astype(np.float32)
        inputs = [x, self.const(f"{name}.weight", w)]
        if not self.batchnorm:
            inputs.append(self.const(f"{name}.bias", self._vector(cout, 0.05, 0)))
        pad = k // 2
        y = self.node(
            "Conv", inputs, name, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4
        )
        if not self.batchnorm:
            return y
        params = [
            self.const(f"{name}.bn.{role}", value)
            for role, value in (
                ("scale", self._vector(cout, 0.1, 1.0)),
                ("bias", self._vector(cout, 0.05, 0.0)),
                ("mean", self._vector(cout, 0.05, 0.0)),
                ("var", np.abs(self._vector(cout, 0.1, 1.0)) + 0.1),
            )
        ]
        return self.node("BatchNormalization", [y, *params], f"{name}.bn", epsilon=1e-5)

    def _vector(self, n: int, std: float, mean: float) -> np.ndarray:
        return (self.rng.normal(mean, std, n)).astype(np.float32)

    def block(self, x: str, cin: int, cout: int, *, stride: int, name: str) -> str:
        y = self.node(
            "Relu",
            [self.conv(x, cin, cout, 3, stride=stride, name=f"{name}.conv1")],
            f"{name}.relu1",
        )
        y = self.conv(y, cout, cout, 3, stride=1, name=f"{name}.conv2")
        shortcut = (
            x
            if stride == 1 and cin == cout
            else self.conv(x, cin, cout, 1, stride=stride, name=f"{name}.downsample")
        )
        y = self.node("Add", [y, shortcut], f"{name}.add")
        return self.node("Relu", [y], f"{name}.relu2")


def resnet18(
    *,
    batch: int | str = 1,
    size: int = 224,
    num_classes: int = 1000,
    seed: int = 0,
    opset: int = 13,
    batchnorm: bool = True,
    width: int = 64,
) -> Any:
    """A ResNet-18-shaped ``onnx.ModelProto`` with random (He-initialized) weights.

    ``batch`` may be a string for a symbolic batch dimension; ``width`` scales every stage
    (64 is the real model; tests use a narrower one). With ``batchnorm`` each Conv is followed
    by a BatchNormalization (as a training export is), otherwise convolutions carry biases.
    """
    b = _Builder(seed, batchnorm)
    y = b.node("Relu", [b.conv("input", 3, width, 7, stride=2, name="conv1")], "relu")
    y = b.node("MaxPool", [y], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    cin = width
    for stage, mult in enumerate((1, 2, 4, 8), start=1):
        cout = width * mult
        for index in range(2):
            stride = 2 if stage > 1 and index == 0 else 1
            y = b.block(y, cin, cout, stride=stride, name=f"layer{stage}.{index}")
            cin = cout
    y = b.node("GlobalAveragePool", [y], "avgpool")
    y = b.node("Flatten", [y], "flatten", axis=1)
    fc_w = b.rng.normal(0, np.sqrt(1 / cin), (num_classes, cin)).astype(np.float32)
    fc_b = b._vector(num_classes, 0.01, 0.0)
    b.node("Gemm", [y, b.const("fc.weight", fc_w), b.const("fc.bias", fc_b)], "logits", transB=1)
    graph = helper.make_graph(
        b.nodes,
        "resnet18",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, num_classes])],
        b.inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="quantemu.graph.zoo"
    )
    model.ir_version = min(model.ir_version, 8)  # loadable by older onnxruntime builds too
    return model
