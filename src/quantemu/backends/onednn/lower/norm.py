"""LayerNormalization -> PyTorch's ``quantized::layer_norm`` (``torch.ao.nn.quantized.LayerNorm``),
the module the x86 FX flow puts in place of ``nn.LayerNorm``: ATen's binary32 kernel, bit for
bit (:mod:`..layer_norm`). The last-axis form with constant Scale and B only; any other form
stays a float fallback."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quantemu.backends.onednn.aten import TorchU8Encoding
from quantemu.backends.onednn.layer_norm import MAX_ROW, quantized_layer_norm
from quantemu.backends.onednn.lower.context import Context, U8Layer
from quantemu.graph.ir import Node
from quantemu.program import LayerOutput, QTensor
from quantemu.program.lowering import NotLowerable


@dataclass(frozen=True, eq=False, kw_only=True)
class QLayerNormLayer(U8Layer):
    """PyTorch ``quantized::layer_norm`` over the last axis (see :mod:`..layer_norm`)."""

    input_encoding: TorchU8Encoding
    gamma: np.ndarray  # float32 (N,)
    beta: np.ndarray  # float32 (N,)
    eps: float  # binary64, as the PyTorch module holds it

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        x, enc = inputs[0].codes, self.input_encoding
        y, saturated = quantized_layer_norm(
            x,
            self.gamma,
            self.beta,
            x_qparams=(enc.scale, enc.zp),
            y_qparams=(self.encoding.scale, self.encoding.zp),
            eps=self.eps,
        )
        return LayerOutput(QTensor(y, self.encoding), {"output_saturated": saturated})


def torch_eps(epsilon: float) -> float:
    """The binary64 ``eps`` behind an exported binary32 ``epsilon``: its shortest decimal.

    ONNX stores ``epsilon`` as binary32, while ``nn.LayerNorm`` keeps the Python float the user
    wrote (``1e-5``), and the kernel adds it in binary64; the shortest decimal that round-trips
    the binary32 value is that literal for any eps written with up to 7 significant digits.

    >>> torch_eps(float(np.float32(1e-5)))
    1e-05
    """
    return float(np.format_float_scientific(np.float32(epsilon), unique=True))


def _per_element(ctx: Context, node: Node, index: int, n: int) -> np.ndarray:
    """Input ``index`` (Scale or B) as constant float32 ``(N,)``; zeros for an absent B."""
    if index >= len(node.inputs):
        return np.zeros(n, np.float32)
    name = node.inputs[index]
    if name not in ctx.graph.initializers:
        raise NotLowerable(f"input {index} ({name}) is not a constant")
    value = np.asarray(ctx.graph.initializers[name])
    if value.dtype != np.float32 or value.size not in (1, n):
        raise NotLowerable(f"input {index} ({name}) is {value.dtype} {value.shape}, not f32 ({n},)")
    return np.ascontiguousarray(np.broadcast_to(value.reshape(-1), (n,)))


def lower_layer_norm(ctx: Context, node: Node) -> QLayerNormLayer:
    """LayerNormalization over the last axis with constant Scale/B -> ``quantized::layer_norm``."""
    x = ctx.activation(node, 0)
    shape = ctx.graph.tensors[x].shape
    if len(node.outputs) > 1:
        raise NotLowerable("its Mean/InvStdDev outputs are read")
    if node.attrs["axis"] != len(shape) - 1:
        raise NotLowerable(f"it normalizes from axis {node.attrs['axis']}, not the last axis")
    n = shape[-1]
    if not isinstance(n, int) or not 0 < n <= MAX_ROW:
        raise NotLowerable(f"the last axis has size {n}, not a known size up to {MAX_ROW}")
    return ctx.layer(
        QLayerNormLayer,
        node,
        op="quantized::layer_norm [aten]",
        inputs=(x,),
        input_encoding=ctx.encodings[x],
        gamma=_per_element(ctx, node, 1, n),
        beta=_per_element(ctx, node, 2, n),
        eps=torch_eps(node.attrs["epsilon"]),
    )
