"""Build a one-operator int8 TFLite model without TensorFlow (helper of
``make_xformer_kept_builtins.py``; needs ai-edge-litert for its flatbuffer schema).

The model holds one CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED with seeded int8 weights,
int32 biases and per-channel weight scales, written as TensorFlow's converter writes them
(weights quantized on axis 0 for CONV_2D/FULLY_CONNECTED and axis 3 for DEPTHWISE_CONV_2D,
bias scale ``s_in * s_w[c]``, zero point 0). The output scale is chosen from the weights so
that about three standard deviations of the accumulator fill the int8 range.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as fb

_PADDING = {"SAME": fb.Padding.SAME, "VALID": fb.Padding.VALID}
_ACT = {"NONE": 0, "RELU": 1, "RELU6": 3}


@dataclass(frozen=True)
class OneOp:
    """One operator's geometry and quantization; ``kind``: conv, depthwise or fc."""

    kind: str
    shape: tuple[int, ...]  # the input without batch: (H, W, C), or (C,) for fc
    out_channels: int  # conv/fc: filters; depthwise: C * depth multiplier
    kernel: tuple[int, int] = (3, 3)
    strides: tuple[int, int] = (1, 1)
    dilations: tuple[int, int] = (1, 1)
    padding: str = "VALID"
    activation: str = "NONE"
    bias: bool = True
    groups: int = 1  # conv only: filter depth C / groups
    in_quant: tuple[float, int] = (1 / 64, 3)
    out_zero_point: int = -5
    seed: int = 0
    extra: dict = field(default_factory=dict, compare=False)


def _quant(scale, zero_point, axis=0):
    q = fb.QuantizationParametersT()
    q.scale = [float(s) for s in np.atleast_1d(scale)]
    q.zeroPoint = [int(z) for z in np.broadcast_to(zero_point, len(q.scale))]
    q.quantizedDimension = axis
    return q


class _Model:
    """Tensors and buffers of one subgraph, added one by one."""

    def __init__(self) -> None:
        self.tensors: list = []
        self.buffers: list = [fb.BufferT()]  # buffer 0: empty, as the converter writes it

    def tensor(self, name, shape, dtype, quant, data=None) -> int:
        t = fb.TensorT()
        t.name, t.shape, t.type, t.quantization = name, list(shape), dtype, quant
        t.buffer = 0
        if data is not None:
            b = fb.BufferT()
            b.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8)
            t.buffer = len(self.buffers)
            self.buffers.append(b)
        self.tensors.append(t)
        return len(self.tensors) - 1


def _weights(spec: OneOp, rng):
    """int8 weights in the file's layout and their per-channel scales."""
    kh, kw = spec.kernel
    c_in = spec.shape[-1]
    if spec.kind == "fc":
        shape = (spec.out_channels, c_in)
    elif spec.kind == "depthwise":
        shape = (1, kh, kw, spec.out_channels)
    else:
        shape = (spec.out_channels, kh, kw, c_in // spec.groups)
    w = rng.integers(-127, 128, shape).astype(np.int8)
    scales = rng.uniform(0.002, 0.02, spec.out_channels).astype(np.float32)
    return w, scales


def _output_scale(spec: OneOp, w, s_w) -> float:
    """About three accumulator standard deviations over the int8 range (uniform inputs)."""
    taps = w.size // spec.out_channels
    acc_std = 74.0 * 73.0 * np.sqrt(taps)  # std of U(-128, 127) codes times |w| ~ 73
    return float(3 * acc_std * spec.in_quant[0] * float(np.median(s_w)) / 127)


def _options(spec: OneOp):
    act = _ACT[spec.activation]
    if spec.kind == "fc":
        o = fb.FullyConnectedOptionsT()
        o.fusedActivationFunction = act
        return fb.BuiltinOperator.FULLY_CONNECTED, fb.BuiltinOptions.FullyConnectedOptions, o
    if spec.kind == "depthwise":
        o = fb.DepthwiseConv2DOptionsT()
        o.depthMultiplier = spec.out_channels // spec.shape[-1]
        code, kind = fb.BuiltinOperator.DEPTHWISE_CONV_2D, fb.BuiltinOptions.DepthwiseConv2DOptions
    else:
        o = fb.Conv2DOptionsT()
        code, kind = fb.BuiltinOperator.CONV_2D, fb.BuiltinOptions.Conv2DOptions
    o.padding = _PADDING[spec.padding]
    o.strideH, o.strideW = spec.strides
    o.dilationHFactor, o.dilationWFactor = spec.dilations
    o.fusedActivationFunction = act
    return code, kind, o


def _out_hw(spec: OneOp) -> tuple[int, int]:
    h, w, _ = spec.shape
    dims = []
    for size, k, s, d in zip((h, w), spec.kernel, spec.strides, spec.dilations, strict=True):
        span = d * (k - 1) + 1
        dims.append(-(-size // s) if spec.padding == "SAME" else (size - span) // s + 1)
    return dims[0], dims[1]


def build(spec: OneOp) -> bytes:
    """The .tflite bytes of ``spec``'s one-operator int8 model."""
    rng = np.random.default_rng(spec.seed)
    w, s_w = _weights(spec, rng)
    s_in, zp_in = spec.in_quant
    s_out = _output_scale(spec, w, s_w)
    m = _Model()
    x = m.tensor("input", (1, *spec.shape), fb.TensorType.INT8, _quant(s_in, zp_in))
    axis = 3 if spec.kind == "depthwise" else 0
    wt = m.tensor("weights", w.shape, fb.TensorType.INT8, _quant(s_w, 0, axis), w)
    inputs = [x, wt]
    if spec.bias:
        b = rng.integers(-4000, 4000, spec.out_channels).astype(np.int32)
        bias_scale = (np.float64(s_in) * s_w.astype(np.float64)).astype(np.float32)
        inputs.append(m.tensor("bias", b.shape, fb.TensorType.INT32, _quant(bias_scale, 0), b))
    else:
        inputs.append(-1)
    out_shape = (
        (1, spec.out_channels) if spec.kind == "fc" else (1, *_out_hw(spec), spec.out_channels)
    )
    y = m.tensor("output", out_shape, fb.TensorType.INT8, _quant(s_out, spec.out_zero_point))
    return _serialize(m, _options(spec), inputs, (x, y))


def _serialize(m: _Model, operator, inputs, io) -> bytes:
    code, kind, options = operator
    x, y = io
    opcode = fb.OperatorCodeT()
    opcode.builtinCode = code
    opcode.deprecatedBuiltinCode = min(code, 127)
    opcode.version = 1
    op = fb.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, inputs, [y]
    op.builtinOptionsType, op.builtinOptions = kind, options
    sg = fb.SubGraphT()
    sg.tensors, sg.operators, sg.inputs, sg.outputs = m.tensors, [op], [x], [y]
    sg.name = "main"
    model = fb.ModelT()
    model.version, model.operatorCodes, model.subgraphs = 3, [opcode], [sg]
    model.buffers, model.description = m.buffers, "quantemu tools/tflite_one_op.py"
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


__all__ = ["OneOp", "build"]
