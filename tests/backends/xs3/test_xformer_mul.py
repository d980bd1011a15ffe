"""XC_mul: runtime against its scalar twin, mul_boggle against xcore-opt 1.4.2, and the two
reference models through the xs3 backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tflite
from hypothesis import given
from hypothesis import strategies as st
from tests.strategies import signed_ints

import quantemu
from quantemu.backends.xs3.xformer import reference as ref
from quantemu.backends.xs3.xformer.compiled import decode_options
from quantemu.backends.xs3.xformer.mul import XcMulParams, xc_mul_host, xc_mul_params
from quantemu.errors import UnsupportedError

DATA = Path(__file__).resolve().parents[2] / "data" / "tflite_refs"
I8, I16 = signed_ints(8), signed_ints(16)


@given(I8, I8, st.tuples(I8, I8, I16, I16, st.integers(-31, 15)))
def test_xc_mul_matches_reference(x1, x2, params):
    got = xc_mul_host(np.array([x1]), np.array([x2]), XcMulParams(*params))
    assert int(got[0]) == ref.mul_elementwise(x1, x2, params)


@given(st.tuples(I8, I8, I16, I16, I16))
def test_blob_roundtrip(params):
    p = XcMulParams(*params)
    assert XcMulParams.from_blob(p.to_blob()) == p


# (scales s1, s2, s_out as float32 values; zero points; the 'mp' blob xcore-opt 1.4.2 wrote),
# from patched-quantization MUL models compiled by xcore-opt: shifts -1 .. -8
COMPILED = [
    (
        (0.6336578130722046, 0.00037725799484178424, 0.44690197706222534),
        (-65, -49, 94),
        "4030002fc408ffff",
    ),
    (
        (0.0004391451075207442, 0.758056640625, 0.026932919397950172),
        (-54, -99, -20),
        "356200fb4165feff",
    ),
    (
        (0.4668644666671753, 0.00014400298823602498, 0.002624463988468051),
        (31, 127, -11),
        "e08050ff7634fcff",
    ),
    (
        (0.07579447329044342, 0.2199261486530304, 0.06707288324832916),
        (-127, -8, -73),
        "7e076eff9f3ff9ff",
    ),
    (
        (0.058257002383470535, 0.0005179496365599334, 0.001764814485795796),
        (-32, 127, -127),
        "1f8020f00846fdff",
    ),
    (
        (0.0004307448980398476, 0.642861008644104, 0.00034424924524500966),
        (43, 2, 60),
        "d4fd3c00f666f8ff",
    ),
    (
        (0.00029677062411792576, 0.0027609309181571007, 2.1114126866450533e-05),
        (127, 106, 25),
        "8095c800bd27fbff",
    ),
    (
        (0.36714503169059753, 0.1265481412410736, 0.2610965073108673),
        (-81, 104, 108),
        "5097b0011c5bfaff",
    ),
]


@pytest.mark.parametrize(("scales", "zps", "blob"), COMPILED)
def test_params_equal_xcore_opt(scales, zps, blob):
    s1, s2, so = (np.float32(s) for s in scales)
    assert xc_mul_params(s1, s2, so, *zps) == XcMulParams.from_blob(bytes.fromhex(blob))


@pytest.mark.parametrize(
    ("scales", "zps"),
    [
        ((0.001632222323678434, 0.006516157183796167, 1.0966269655909855e-05), (-128, -25, 103)),
        ((0.013088541105389595, 0.027945952489972115, 0.00014993410150054842), (118, 108, -81)),
    ],
)
def test_params_refused_where_xcore_opt_hangs(scales, zps):
    with pytest.raises(UnsupportedError, match="never terminates"):
        xc_mul_params(*(np.float32(s) for s in scales), *zps)


@pytest.mark.parametrize(
    ("params", "pairs", "want"),
    [
        # VLMUL beyond int16 is not clamped before VLADD (a clamp would give -128 for all)
        ((71, 53, 17758, -32690, -30), [(111, 126), (112, 125), (112, 126)], [0, 0, 127]),
        # a left VLASHR by 20 wraps in int32 (a saturating shift would give the other rail)
        ((0, 0, 100, 20000, -20), [(-128, -105), (-53, 69), (92, 61)], [-128, 127, -128]),
        # a positive VLASHR shift floors (never derived by xcore-opt; patched into the blob)
        ((0, 0, -64, 16479, 3), [(127, 127), (-128, 127), (5, -3)], [4, -4, 0]),
    ],
)
def test_host_interpreter_edges(params, pairs, want):
    """Outputs of the 1.4.2 host interpreter on a compiled XC_mul with a patched 'mp' blob."""
    x1, x2 = (np.array(v) for v in zip(*pairs, strict=True))
    assert xc_mul_host(x1, x2, XcMulParams(*params)).tolist() == want


def _mul_blobs(path: Path) -> list[bytes]:
    model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    sg, blobs = model.Subgraphs(0), []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex()).CustomCode()
        if code == b"XC_mul":
            blobs.append(decode_options(bytes(op.CustomOptionsAsNumpy()))["mp"])
    return blobs


@pytest.mark.parametrize("name", ["mul", "mul_channel_const"])
def test_reference_models(name):
    data = np.load(DATA / f"{name}.npz")
    program = quantemu.compile(DATA / f"{name}.int8.tflite", "xs3")
    layers = [layer for layer in program.lowered.layers if layer.op == "XC_mul"]
    assert len(layers) == 1
    assert [layers[0].params.to_blob()] == _mul_blobs(DATA / f"{name}.xcore.tflite")
    y = program.run(data["x_int8"]).tensors[program.graph.outputs[0]].codes
    assert np.array_equal(y, data["y_xcore"])
