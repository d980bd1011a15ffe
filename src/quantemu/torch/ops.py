"""The float graph's operators in torch: the differentiable path of quantization-aware training.

:class:`~quantemu.torch.qat.QatModel` computes every value exactly with the backend's integer
layers and takes its gradients from this float twin of the graph (the straight-through
estimator). Each kernel follows the ONNX operator as :mod:`quantemu.graph.ops` implements it
(normalized attributes: ``pads = (top, left, bottom, right)``, fused activations recorded as the
``activation`` attribute). Only the values' gradients matter here: the forward values are replaced
by the exact ones at every quantized tensor, but the shapes must be the graph's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Attrs, Node

Kernel = Callable[[Attrs, Sequence[torch.Tensor | None]], torch.Tensor]


def activation(y: torch.Tensor, attrs: Attrs) -> torch.Tensor:
    """The fused activation recorded on a producer (``graph.ops.activation``), if any."""
    kind = attrs.get("activation")
    if kind is None:
        return y
    if kind == "relu":
        return torch.relu(y)
    if kind == "clip":
        return torch.clamp(y, attrs["activation_min"], attrs["activation_max"])
    if kind == "leaky_relu":
        return F.leaky_relu(y, attrs["activation_alpha"])
    raise UnsupportedError(f"fused activation {kind!r} has no torch kernel")


def _pad(x: torch.Tensor, pads: Sequence[int], value: float = 0.0) -> torch.Tensor:
    top, left, bottom, right = pads
    if not (top or left or bottom or right):
        return x
    return F.pad(x, (left, right, top, bottom), value=value)  # negative pads crop


def _conv(attrs: Attrs, inputs) -> torch.Tensor:
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    y = F.conv2d(
        _pad(x, attrs["pads"]),
        w,
        b,
        stride=tuple(attrs["strides"]),
        dilation=tuple(attrs["dilations"]),
        groups=attrs["group"],
    )
    return activation(y, attrs)


def _gemm(attrs: Attrs, inputs) -> torch.Tensor:
    a, b = inputs[0], inputs[1]
    a = a.t() if attrs.get("transA", 0) else a
    b = b.t() if attrs.get("transB", 0) else b
    y = attrs.get("alpha", 1.0) * (a @ b)
    if len(inputs) > 2 and inputs[2] is not None:
        y = y + attrs.get("beta", 1.0) * inputs[2]
    return activation(y, attrs)


def _pool_geometry(attrs: Attrs) -> tuple:
    return tuple(attrs["kernel_shape"]), tuple(attrs["strides"]), attrs.get("ceil_mode", 0)


def _max_pool(attrs: Attrs, inputs) -> torch.Tensor:
    kernel, strides, ceil = _pool_geometry(attrs)
    x = _pad(inputs[0], attrs["pads"], value=-math.inf)
    return F.max_pool2d(
        x, kernel, strides, dilation=tuple(attrs["dilations"]), ceil_mode=bool(ceil)
    )


def _average_pool(attrs: Attrs, inputs) -> torch.Tensor:
    kernel, strides, ceil = _pool_geometry(attrs)
    x = inputs[0]
    total = F.avg_pool2d(_pad(x, attrs["pads"]), kernel, strides, ceil_mode=bool(ceil))
    if attrs.get("count_include_pad", 0) or not any(attrs["pads"]):
        return total
    # Averages over the in-image taps only: the padded sum over the count of real taps.
    ones = torch.ones_like(x[:1, :1])
    count = F.avg_pool2d(_pad(ones, attrs["pads"]), kernel, strides, ceil_mode=bool(ceil))
    return total / count


def _reshape(attrs: Attrs, inputs) -> torch.Tensor:
    x, shape = inputs[0], [int(v) for v in inputs[1].tolist()]
    if not attrs.get("allowzero", 0):
        shape = [x.shape[i] if v == 0 else v for i, v in enumerate(shape)]
    return x.reshape(shape)


def _binary(fn: Callable) -> Kernel:
    def kernel(attrs: Attrs, inputs) -> torch.Tensor:
        return activation(fn(inputs[0], inputs[1]), attrs)

    return kernel


KERNELS: dict[str, Kernel] = {
    "Conv": _conv,
    "Gemm": _gemm,
    "MatMul": lambda attrs, inputs: activation(inputs[0] @ inputs[1], attrs),
    "Add": _binary(torch.add),
    "Sub": _binary(torch.sub),
    "Mul": _binary(torch.mul),
    "Div": _binary(torch.div),
    "Relu": lambda attrs, inputs: torch.relu(inputs[0]),
    "LeakyRelu": lambda attrs, inputs: F.leaky_relu(inputs[0], attrs.get("alpha", 0.01)),
    "Sigmoid": lambda attrs, inputs: torch.sigmoid(inputs[0]),
    "Tanh": lambda attrs, inputs: torch.tanh(inputs[0]),
    "Clip": lambda attrs, inputs: (
        activation(inputs[0], attrs)
        if "activation" in attrs
        else torch.clamp(
            inputs[0],
            None if len(inputs) < 2 or inputs[1] is None else float(inputs[1]),
            None if len(inputs) < 3 or inputs[2] is None else float(inputs[2]),
        )
    ),
    "MaxPool": _max_pool,
    "AveragePool": _average_pool,
    "GlobalAveragePool": lambda attrs, inputs: inputs[0].mean(dim=(2, 3), keepdim=True),
    "GlobalMaxPool": lambda attrs, inputs: inputs[0].amax(dim=(2, 3), keepdim=True),
    "Flatten": lambda attrs, inputs: inputs[0].reshape(
        math.prod(inputs[0].shape[: attrs.get("axis", 1)]), -1
    ),
    "Reshape": _reshape,
    "Concat": lambda attrs, inputs: torch.cat(list(inputs), dim=attrs["axis"]),
    "Softmax": lambda attrs, inputs: torch.softmax(inputs[0], dim=attrs.get("axis", -1)),
    "Transpose": lambda attrs, inputs: inputs[0].permute(*attrs["perm"]),
}


def kernel(node: Node) -> Kernel:
    """The torch kernel of ``node``'s operator, or an error naming what exists."""
    try:
        return KERNELS[node.op_type]
    except KeyError:
        raise UnsupportedError(
            f"quantemu.torch: {node} ({node.op_type}) has no differentiable kernel yet; "
            f"supported: {', '.join(sorted(KERNELS))}"
        ) from None


def unsupported(nodes: Sequence[Node]) -> list[str]:
    """The operator types among ``nodes`` that have no torch kernel."""
    return sorted({n.op_type for n in nodes if n.op_type not in KERNELS})
