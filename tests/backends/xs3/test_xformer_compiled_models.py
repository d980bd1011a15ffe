"""Compiled models (``*.xcore.tflite``) simulated as compiled, against XMOS's host interpreter.

``y_xcore`` and the ``xcore_NN`` intermediates come from xmos-ai-tools 1.4.2's
TFLMHostInterpreter on the same compiled files (tests/data/models_xs3_public: the public
conformance set; tests/data/tflite_refs: one model per other operator). The XC_ ops' arithmetic
is checked here per element against scalar transcriptions of lib_nn's reference C.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import quantemu
from quantemu.backends.xs3.xformer.lower.compiled import XcConvCompiledLayer
from quantemu.backends.xs3.xformer.lower.compiled_layers import XcAddLayer, XcMeanLayer, XcMulLayer
from quantemu.backends.xs3.xformer.lower.conv import XcConv2dLayer
from quantemu.backends.xs3.xformer.mul import XcMulParams
from quantemu.backends.xs3.xformer.reference import mul_elementwise
from quantemu.errors import UnsupportedError
from quantemu.graph.tflite_import import load_tflite, nhwc_view
from quantemu.graph.tflite_reader import read_tflite
from quantemu.program import LinearEncoding, QTensor

DATA = Path(__file__).resolve().parents[2] / "data"
PUBLIC = [("models_xs3_public", n) for n in ("conv_relu_stack", "depthwise_sep", "mlp", "rgb_conv")]
_REFS = json.loads((DATA / "tflite_refs" / "MANIFEST.json").read_text())["models"]
# every reference model that XMOS's host interpreter ran, compiled
REFS = [
    ("tflite_refs", n)
    for n, m in _REFS.items()
    if not {"xcore_opt", "y_xcore"} & set(m.get("notes", {}))
]
# compiled by xcore-opt, but the host interpreter lacks one of its builtins (SQUARED_DIFFERENCE)
NOT_RUN = [n for n, m in _REFS.items() if "y_xcore" in m.get("notes", {})]
# xcore-opt itself refused to compile (BATCH_MATMUL)
NOT_COMPILED = [n for n, m in _REFS.items() if "xcore_opt" in m.get("notes", {})]
ENC = LinearEncoding(np.float32(1.0), np.int8(0), "int8")


def _compiled(folder: str, name: str):
    return quantemu.compile(DATA / folder / f"{name}.xcore.tflite", "xs3")


@pytest.mark.parametrize(("folder", "name"), PUBLIC + REFS)
def test_outputs_equal_the_host_interpreter(folder, name):
    data = np.load(DATA / folder / f"{name}.npz")
    program = _compiled(folder, name)
    out = program.run(data["x_int8"], keep="all").tensors[program.graph.outputs[0]].codes
    assert np.array_equal(out.reshape(data["y_xcore"].shape), data["y_xcore"])


@pytest.mark.parametrize(("folder", "name"), PUBLIC + REFS)
def test_every_intermediate_equals_the_host_interpreter(folder, name):
    info = json.loads((DATA / folder / "MANIFEST.json").read_text())["models"][name]["layers"]
    dumps = np.load(DATA / folder / f"{name}.layers.npz")
    x = np.load(DATA / folder / f"{name}.npz")["x_int8"][: info["n_inputs"]]
    path = DATA / folder / f"{name}.xcore.tflite"
    program = _compiled(folder, name)
    tensors = program.run(x, keep="all").tensors
    names = read_tflite(path).tensors
    checked = 0
    for ref in info["xcore_tensors"]:
        if ref["key"] is None:  # an XC_no_op's output: not captured (it aliases its input)
            continue
        ir_name = names[ref["tensor"]].name
        got = nhwc_view(program.graph, ir_name, tensors[ir_name].codes)
        want = dumps[ref["key"]].reshape(len(x), *ref["shape"][1:])
        got = np.broadcast_to(got, want.shape)  # a broadcast constant has batch 1
        assert np.array_equal(got, want), (name, ref["key"], ref["op"])
        checked += 1
    assert checked > 0


@pytest.mark.parametrize(("folder", "name"), PUBLIC)
def test_conv_parameters_in_the_file_equal_our_derivation(folder, name):
    """The xs3 lowering of the int8 model derives what xcore-opt wrote into the file."""
    ours = [
        layer
        for layer in quantemu.compile(DATA / folder / f"{name}.int8.tflite", "xs3").lowered.layers
        if isinstance(layer, XcConv2dLayer)
    ]
    stored = [
        layer.params
        for layer in _compiled(folder, name).lowered.layers
        if isinstance(layer, XcConvCompiledLayer)
    ]
    assert len(ours) == len(stored) > 0
    for layer, p in zip(ours, stored, strict=True):
        out = layer.ot.mul.size  # the file pads channels to a multiple of 4 (zero filters)
        assert p.ot_kind is layer.ot.kind and p.final_shr == layer.ot.final_shr
        for field in ("mul", "bias", "shift"):
            assert np.array_equal(getattr(p, field)[:out], getattr(layer.ot, field)), field
        w = layer.weights  # OIHW, depthwise (C, 1, kh, kw)
        if p.kernel_type.depthwise:
            filed = p.weights[0].transpose(2, 0, 1)[:out, None]
            padding = [p.weights[0][..., out:]]
        else:
            filed = p.weights.transpose(0, 3, 1, 2)[:out, : w.shape[1]]
            padding = [p.weights[out:], p.weights[..., w.shape[1] :]]  # channels xformer adds
        assert np.array_equal(filed, w)
        assert not any(part.any() for part in padding)


def test_an_unknown_xc_op_is_unsupported_by_name():
    graph = load_tflite(DATA / "models_xs3_public" / "mlp.xcore.tflite")
    node = graph.nodes[3]
    bogus = type(node)(
        node.name, "TfliteCustom", node.inputs, node.outputs, {**node.attrs, "custom_code": "XC_x"}
    )
    graph = graph.replace(nodes=(*graph.nodes[:3], bogus, *graph.nodes[4:]))
    with pytest.raises(UnsupportedError, match="XC_x"):
        quantemu.compile(graph, "xs3")


# -- element-wise arithmetic vs scalar transcriptions of lib_nn's reference C -------------------


def _fields(cls, **kw):
    base = {"name": "t", "op": "t", "inputs": ("a", "b"), "output": "y", "exact": True}
    return cls(**base, note="", out_shape=(1,), encoding=ENC, **kw)


def _run(layer, *columns):
    qs = [QTensor(np.array(c, np.int8).reshape(-1, 1), ENC) for c in columns]
    return layer.compute(qs).tensor.codes.reshape(-1).tolist()


def add_scalar(x1: int, x2: int, *, m1: int, m2: int, bias: int, shift: int) -> int:
    """``add_elementwise_ref``'s tail loop: ``ROUND_SHR`` then the int8 clamp."""
    acc = bias + x1 * m1 + x2 * m2
    return min(max((acc + (1 << (shift - 1))) >> shift, -128), 127)


def mean_scalar(xs: list[int], zp_in: float, zp_out: float, sm: float) -> int:
    """``mean_int8`` on one output: float32 multiply-add, clamp, ``roundf``."""
    acc = int(-zp_in * len(xs)) + sum(xs)
    q = float(np.float32(np.float32(np.float32(acc) * np.float32(sm)) + np.float32(zp_out)))
    q = min(max(q, -128.0), 127.0)
    return int(math.copysign(math.floor(abs(q) + 0.5), q))


int8s = st.integers(-128, 127)
int16s = st.integers(-32768, 32767)


@given(st.lists(st.tuples(int8s, int8s), min_size=1, max_size=8), int16s, int16s,
       st.integers(-(2**24), 2**24), st.integers(1, 20))  # fmt: skip
def test_add_equals_scalar(pairs, m1, m2, bias, shift):
    layer = _fields(XcAddLayer, m1=m1, m2=m2, bias=bias, shift=shift)
    x1, x2 = zip(*pairs, strict=True)
    params = {"m1": m1, "m2": m2, "bias": bias, "shift": shift}
    assert _run(layer, x1, x2) == [add_scalar(a, b, **params) for a, b in pairs]


@given(st.lists(st.tuples(int8s, int8s), min_size=1, max_size=8), st.tuples(int8s, int8s),
       st.integers(0, 32767), int16s, st.integers(-6, -1))  # fmt: skip
def test_mul_equals_scalar(pairs, zero_points, scalar, bias, shr):
    offsets = tuple(-z - 1 for z in zero_points)
    params = XcMulParams(*offsets, bias, scalar, shr)
    layer = _fields(XcMulLayer, params=params)
    x1, x2 = zip(*pairs, strict=True)
    want = [mul_elementwise(a, b, (*offsets, bias, scalar, shr)) for a, b in pairs]
    assert _run(layer, x1, x2) == want


@given(st.lists(int8s, min_size=1, max_size=12), int8s, int8s,
       st.floats(2.0**-14, 4.0, width=32))  # fmt: skip
def test_mean_equals_scalar(xs, zp_in, zp_out, sm):
    layer = _fields(XcMeanLayer, dims=(1, len(xs), 1), zp_in=float(zp_in), zp_out=float(zp_out),
                    scale_mul=sm)  # fmt: skip
    got = layer.compute([QTensor(np.array(xs, np.int8).reshape(1, -1), ENC)]).tensor.codes
    assert got.reshape(-1).tolist() == [mean_scalar(xs, zp_in, zp_out, sm)]


@pytest.mark.parametrize("name", NOT_RUN)
def test_compiled_equals_the_xformer_lowering_where_the_host_interpreter_cannot_run(name):
    """No host-interpreter output exists (its build lacks a builtin that xcore-opt's own
    TFLite-Micro, and the device's, register): the compiled file, simulated with the parameters
    xcore-opt wrote, must give what quantemu's own xcore-opt lowering of the int8 file gives."""
    x = np.load(DATA / "tflite_refs" / f"{name}.npz")["x_int8"]
    compiled = _compiled("tflite_refs", name)
    lowered = quantemu.compile(DATA / "tflite_refs" / f"{name}.int8.tflite", "xs3")
    a = compiled.run(x, keep="all").tensors[compiled.graph.outputs[0]].codes
    b = lowered.run(x, keep="all").tensors[lowered.graph.outputs[0]].codes
    assert np.array_equal(a, b.reshape(a.shape))


@pytest.mark.parametrize("name", NOT_COMPILED)
def test_xs3_refuses_what_xcore_opt_cannot_compile(name):
    op = re.search(r"builtin opcode '(\w+)'", _REFS[name]["notes"]["xcore_opt"]).group(1)
    with pytest.raises(UnsupportedError, match=op):
        quantemu.compile(DATA / "tflite_refs" / f"{name}.int8.tflite", "xs3")
