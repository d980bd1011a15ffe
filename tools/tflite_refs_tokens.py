"""Token-shaped (transformer) models of ``tests/data/tflite_refs`` and their hand-written float
ONNX (helper of ``make_tflite_refs.py`` / ``tflite_refs_float.py``; TensorFlow venv, never
imported by quantemu).

The per-sample input is ``(tokens, dim)`` instead of an image ``(h, w, c)`` (``hard_sigmoid``
excepted). tf2onnx would write LayerNormalization as Sub/Pow/Sqrt/Div and hard_sigmoid as
Mul/Add/Clip, which is not what a PyTorch user's export looks like (``nn.LayerNorm`` ->
``LayerNormalization``, ``nn.Hardsigmoid`` -> ``HardSigmoid``, opset 17), so the models of
HANDWRITTEN get their float ONNX from onnx.helper with exactly the Keras weights.
"""

from __future__ import annotations

import numpy as np
import onnx
import tensorflow as tf
import tf_keras as keras
from onnx import TensorProto, helper, numpy_helper

L = keras.layers
EPS = 1e-5
D, HEADS = 32, 4

# ---------------------------------------------------------------- builders (x, c) -> y


def _attend(q, k, v):
    scale = 1.0 / np.sqrt(q.shape[-1])  # the per-head width
    s = L.Lambda(lambda t: tf.matmul(t[0], t[1], transpose_b=True) * scale)([q, k])
    return L.Lambda(lambda t: tf.matmul(t[0], t[1]))([L.Softmax()(s), v])


def b_layer_norm(x, c):
    return L.LayerNormalization(epsilon=EPS)(x)


def b_attention(x, c):
    q, k, v = (L.Dense(D)(x) for _ in range(3))
    return L.Dense(D)(_attend(q, k, v))


def b_attention_heads(x, c):
    t = x.shape[1]

    def split(y):  # (t, D) -> (HEADS, t, D / HEADS)
        return L.Permute((2, 1, 3))(L.Reshape((t, HEADS, D // HEADS))(y))

    q, k, v = (split(L.Dense(D)(x)) for _ in range(3))
    o = L.Reshape((t, D))(L.Permute((2, 1, 3))(_attend(q, k, v)))
    return L.Dense(D)(o)


def b_hard_sigmoid(x, c):
    return L.Activation("hard_sigmoid")(L.Conv2D(c, 1)(x))


def b_encoder_relu(x, c):
    y = L.LayerNormalization(epsilon=EPS)(x)
    y = L.Dense(c)(L.Dense(2 * c, activation="relu")(y))
    return L.Add()([x, y])


BUILDERS = {k[2:]: v for k, v in globals().items() if k.startswith("b_")}

TOK = (16, D)
SPECS = [
    # name, builder, per-sample input shape, rep_range, model_seed, input_seed, options
    ("layer_norm", "layer_norm", TOK, (-1.0, 1.0), 15000, 15001, {}),
    ("attention", "attention", TOK, (-1.0, 1.0), 15010, 15011, {}),
    ("attention_heads", "attention_heads", TOK, (-1.0, 1.0), 15020, 15021, {}),
    ("hard_sigmoid", "hard_sigmoid", (8, 8, 8), (-5.0, 5.0), 15030, 15031, {}),
    ("encoder_relu", "encoder_relu", TOK, (-1.0, 1.0), 15040, 15041, {}),
]


def norm_weight(name: str, shape, rng):
    """LayerNormalization gamma ~ 1 + 0.2 N(0, 1), beta ~ U(-0.2, 0.2); None for others."""
    if name.endswith("gamma:0"):
        return 1.0 + 0.2 * rng.normal(size=shape)
    if name.endswith("beta:0"):
        return rng.uniform(-0.2, 0.2, shape)
    return None


def builder_kwargs(shape) -> dict:
    if len(shape) == 2:
        return {"tokens": shape[0], "dim": shape[1]}
    return {"hw": shape[0], "c": shape[2]}


# ---------------------------------------------------------------- hand-written float ONNX

OPSET = 17
HANDWRITTEN = ("layer_norm", "hard_sigmoid", "encoder_relu")
HOW = {
    "layer_norm": "LayerNormalization(axis=-1, epsilon=1e-5, Scale=gamma, B=beta)",
    "encoder_relu": (
        "LayerNormalization(axis=-1, epsilon=1e-5) -> MatMul + Add -> Relu -> MatMul + Add -> "
        "Add(input) (nn.Linear on 3-D input as PyTorch exports it; weights (in, out))"
    ),
    "hard_sigmoid": (
        "NHWC input/output as tf2onnx writes Keras convs: Transpose(0,3,1,2) -> Conv 1x1 "
        "(OIHW kernel, bias) -> Transpose(0,2,3,1) -> HardSigmoid(alpha=0.2, beta=0.5) "
        "(tf_keras 2.17 hard_sigmoid = clip(0.2 x + 0.5, 0, 1))"
    ),
}


def _w(model, cls):
    return [layer.get_weights() for layer in model.layers if isinstance(layer, cls)]


def _ln(inits, nodes, x, params, tag):
    gamma, beta = params
    inits += [numpy_helper.from_array(gamma, f"{tag}.weight")]
    inits += [numpy_helper.from_array(beta, f"{tag}.bias")]
    node = helper.make_node(
        "LayerNormalization", [x, f"{tag}.weight", f"{tag}.bias"], [f"{tag}.out"], axis=-1,
        epsilon=EPS,
    )  # fmt: skip
    nodes.append(node)
    return f"{tag}.out"


def _linear(inits, nodes, x, params, tag):
    kernel, bias = params
    inits += [numpy_helper.from_array(kernel, f"{tag}.weight")]
    inits += [numpy_helper.from_array(bias, f"{tag}.bias")]
    nodes.append(helper.make_node("MatMul", [x, f"{tag}.weight"], [f"{tag}.mm"]))
    nodes.append(helper.make_node("Add", [f"{tag}.mm", f"{tag}.bias"], [f"{tag}.out"]))
    return f"{tag}.out"


def _body(name, model):
    inits, nodes = [], []
    if name == "layer_norm":
        _ln(inits, nodes, "input", _w(model, L.LayerNormalization)[0], "ln")
    elif name == "encoder_relu":
        fc1, fc2 = _w(model, L.Dense)
        y = _ln(inits, nodes, "input", _w(model, L.LayerNormalization)[0], "ln")
        y = _linear(inits, nodes, y, fc1, "fc1")
        nodes.append(helper.make_node("Relu", [y], ["fc1.relu"]))
        y = _linear(inits, nodes, "fc1.relu", fc2, "fc2")
        nodes.append(helper.make_node("Add", ["input", y], ["res.out"]))
    else:  # hard_sigmoid
        ((k, b),) = _w(model, L.Conv2D)
        inits += [numpy_helper.from_array(np.ascontiguousarray(k.transpose(3, 2, 0, 1)), "conv.w")]
        inits += [numpy_helper.from_array(b, "conv.b")]
        nodes.append(helper.make_node("Transpose", ["input"], ["nchw"], perm=[0, 3, 1, 2]))
        nodes.append(helper.make_node("Conv", ["nchw", "conv.w", "conv.b"], ["conv"]))
        nodes.append(helper.make_node("Transpose", ["conv"], ["nhwc"], perm=[0, 2, 3, 1]))
        nodes.append(helper.make_node("HardSigmoid", ["nhwc"], ["hs"], alpha=0.2, beta=0.5))
    nodes[-1].output[0] = "output"
    return inits, nodes


def handwritten_onnx(name: str, model, shape) -> bytes:
    inits, nodes = _body(name, model)
    out_shape = ["N", *model.output_shape[1:]]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", *shape])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, out_shape)],
        inits,
    )
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tflite_refs_tokens"
    )
    proto.ir_version = 8
    onnx.checker.check_model(proto, full_check=True)
    return proto.SerializeToString()
