"""Solver vs xcore-opt on every XC_conv2d_v2 of the public conformance models (skip if absent)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

tflite = pytest.importorskip("tflite")

from quantemu.backends.xs3.xformer.compiled import XcConv2dV2, xc_op_params  # noqa: E402
from quantemu.backends.xs3.xformer.output_transform import solve_output_transform  # noqa: E402

MODELS = pathlib.Path("/work/shared/conformance/models/xs3")
NAMES = ["conv_relu_stack", "depthwise_sep", "mlp", "rgb_conv"]


def _load(p):
    return tflite.Model.GetRootAsModel(bytearray(p.read_bytes()), 0)


def _arr(m, sg, t, dt):
    tensor = sg.Tensors(t)
    return m.Buffers(tensor.Buffer()).DataAsNumpy().view(dt).reshape(tensor.ShapeAsNumpy())


def _bias(m, sg, t, c):
    return np.zeros(c, np.int64) if t < 0 else _arr(m, sg, t, np.int32).astype(np.int64)


def _q(sg, t):
    q = sg.Tensors(t).Quantization()
    return q.ScaleAsNumpy().astype(np.float32), int(q.ZeroPointAsNumpy()[0])


@pytest.mark.parametrize("name", NAMES)
def test_solver_matches_compiled(name):
    if not (MODELS / f"{name}.xcore.tflite").exists():
        pytest.skip("conformance models not present")
    mi, mx = _load(MODELS / f"{name}.int8.tflite"), _load(MODELS / f"{name}.xcore.tflite")
    si, sx = mi.Subgraphs(0), mx.Subgraphs(0)
    ops = [si.Operators(i) for i in range(si.OperatorsLength())]
    convs = [o for o in ops if mi.OperatorCodes(o.OpcodeIndex()).BuiltinCode() in {3, 4, 9}]
    xcs = [xc_op_params(mx, i) for i in range(sx.OperatorsLength())]
    xcs = [p for p in xcs if isinstance(p, XcConv2dV2)]
    assert len(xcs) == len(convs)
    for o, p in zip(convs, xcs, strict=True):
        w = _arr(mi, si, o.Inputs(1), np.int8)
        depthwise = mi.OperatorCodes(o.OpcodeIndex()).BuiltinCode() == 4
        rows = w.reshape(-1, w.shape[-1]).T if depthwise else w.reshape(w.shape[0], -1)
        c = rows.shape[0]
        pad = p.out_channels - c  # padding channels: zero filter, zero bias, scale 1.0
        s_in, zp_in = _q(si, o.Inputs(0))
        s_w, _ = _q(si, o.Inputs(1))
        s_out, zp_out = _q(si, o.Outputs(0))
        ot = solve_output_transform(
            np.pad(rows, ((0, pad), (0, 0))),
            np.pad(_bias(mi, si, o.Inputs(2), c), (0, pad)),
            s_in=s_in[0], zp_in=zp_in,
            s_w=np.pad(np.broadcast_to(s_w, c), (0, pad), constant_values=1),
            s_out=s_out[0], zp_out=zp_out,
        )  # fmt: skip
        assert ot.kind is p.ot_kind and ot.final_shr == p.final_shr
        assert np.array_equal(ot.mul, p.mul) and np.array_equal(ot.bias, p.bias)
        assert np.array_equal(ot.shift, p.shift)
        assert np.array_equal(p.rows()[:c, : rows.shape[1]], rows) or not depthwise
