"""A small quantized model with user-fixed qparams, as an ONNX QDQ file and as a spec for torch.

The same integers and scales feed both sides of the whole-model cross-check: ``qdq_model`` builds
the ONNX QDQ model quantemu lowers, ``peer_model.py`` builds PyTorch's quantized modules
(engine ``onednn``) from ``model_spec``. Every tensor after the input is named ``y1`` ... ``y10``
on both sides (in ONNX: the DequantizeLinear outputs that carry the qparams).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from quantemu.backends.onednn import weight_scales

F32 = np.float32

# tensor -> (scale, zero point); the pools, GAP and flatten keep their input's qparams.
QPARAMS = {
    "x": (0.02, 128),
    "y1": (0.03, 7),  # conv1 + ReLU with a non-zero zero point: codes max(y, 7)
    "y2": (0.05, 120),
    "y3": (0.04, 3),  # add_relu
    "y5": (0.045, 100),
    "y9": (0.06, 5),  # linear + ReLU
    "y10": (0.08, 128),
}
SAME_AS = {"y4": "y3", "y6": "y5", "y7": "y5", "y8": "y5"}
# layer -> (weight shape, groups)
LAYERS = {
    "conv1": ((20, 3, 3, 3), 1),
    "conv2": ((20, 20, 3, 3), 1),
    "dw": ((20, 1, 3, 3), 20),
    "fc1": ((12, 20), 1),
    "fc2": ((10, 12), 1),
}
TENSORS = [f"y{i}" for i in range(1, 11)]


def qparams(name: str) -> tuple[float, int]:
    """``(binary32 scale as a float, zero point)`` of tensor ``name``."""
    scale, zp = QPARAMS[SAME_AS.get(name, name)]
    return float(F32(scale)), zp


def model_spec(seed: int = 8) -> dict[str, np.ndarray]:
    """Input, int8 weights with per-channel scales, float biases; deterministic."""
    rng = np.random.default_rng(seed)
    spec = {"x": (rng.standard_normal((2, 3, 9, 9)) * 1.5).astype(F32)}
    for name, (shape, _) in LAYERS.items():
        w = (rng.standard_normal(shape) * 0.3).astype(F32)
        if name == "conv2":  # half the filters mostly large and positive: pair saturation
            w[:10] = np.abs(w[:10]) + 0.6
        scales = weight_scales(w)
        codes = np.clip(np.rint(w / scales.reshape(-1, *[1] * (w.ndim - 1))), -128, 127)
        spec[f"{name}/w"] = codes.astype(np.int8)
        spec[f"{name}/scales"] = scales.astype(F32)
        spec[f"{name}/b"] = (rng.standard_normal(shape[0]) * 0.2).astype(F32)
    return spec


def _qdq(nodes, inits, src: str, dst: str) -> None:
    scale, zp = qparams(dst)
    inits[f"{dst}/s"] = np.array(scale, F32)
    inits[f"{dst}/z"] = np.array(zp, np.uint8)
    nodes.append(helper.make_node("QuantizeLinear", [src, f"{dst}/s", f"{dst}/z"], [f"{dst}/q"]))
    nodes.append(helper.make_node("DequantizeLinear", [f"{dst}/q", f"{dst}/s", f"{dst}/z"], [dst]))


def _weight(nodes, inits, spec, name: str) -> str:
    inits[f"{name}/wq"] = spec[f"{name}/w"]
    inits[f"{name}/ws"] = spec[f"{name}/scales"]
    inits[f"{name}/wz"] = np.zeros(spec[f"{name}/scales"].shape, np.int8)
    ins = [f"{name}/wq", f"{name}/ws", f"{name}/wz"]
    nodes.append(helper.make_node("DequantizeLinear", ins, [f"{name}/wf"], axis=0))
    inits[f"{name}/bias"] = spec[f"{name}/b"]
    return f"{name}/wf"


def qdq_model(spec: dict[str, np.ndarray]):
    """The ONNX QDQ model of the spec (opset 13)."""
    nodes, inits = [], {}
    _qdq(nodes, inits, "input", "x")

    def conv(name, src, dst, relu, **attrs):
        w = _weight(nodes, inits, spec, name)
        out = f"{name}/out"
        nodes.append(helper.make_node("Conv", [src, w, f"{name}/bias"], [out], name=name, **attrs))
        if relu:
            nodes.append(helper.make_node("Relu", [out], [f"{name}/relu"]))
            out = f"{name}/relu"
        _qdq(nodes, inits, out, dst)

    def op(kind, ins, dst, **attrs):
        nodes.append(helper.make_node(kind, ins, [f"{dst}/f"], name=f"{dst}_{kind}", **attrs))
        _qdq(nodes, inits, f"{dst}/f", dst)

    pad = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    conv("conv1", "x", "y1", True, **pad)
    conv("conv2", "y1", "y2", False, **pad)
    nodes.append(helper.make_node("Add", ["y2", "y1"], ["add/out"], name="add"))
    nodes.append(helper.make_node("Relu", ["add/out"], ["add/relu"]))
    _qdq(nodes, inits, "add/relu", "y3")
    op("MaxPool", ["y3"], "y4", kernel_shape=[2, 2], strides=[2, 2])
    conv("dw", "y4", "y5", False, group=20, **pad)
    op("AveragePool", ["y5"], "y6", kernel_shape=[2, 2], strides=[2, 2])
    op("GlobalAveragePool", ["y6"], "y7")
    op("Flatten", ["y7"], "y8", axis=1)
    for name, src, dst, relu in (("fc1", "y8", "y9", True), ("fc2", "y9", "y10", False)):
        w = _weight(nodes, inits, spec, name)
        out = f"{name}/out"
        ins = [src, w, f"{name}/bias"]
        nodes.append(helper.make_node("Gemm", ins, [out], name=name, transB=1))
        if relu:
            nodes.append(helper.make_node("Relu", [out], [f"{name}/relu"]))
            out = f"{name}/relu"
        _qdq(nodes, inits, out, dst)
    graph = helper.make_graph(
        nodes,
        "qdq",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 9, 9])],
        [helper.make_tensor_value_info("y10", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model
