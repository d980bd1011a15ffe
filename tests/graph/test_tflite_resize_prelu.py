"""Int8 TFLite files with RESIZE_NEAREST_NEIGHBOR, RESIZE_BILINEAR and PRELU load
(``graph/tflite_ops.py``) and run on the ``tflite`` backend equal to LiteRT's reference kernels:
the one-operator models of ``tests/backends/tflite/{resize,prelu}_peer_vectors.json``
(``tools/make_resize_vectors.py``, ``tools/make_prelu_vectors.py``) against the outputs stored
there, and live against LiteRT on fresh inputs where it is installed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import quantemu
from quantemu.errors import UnsupportedError
from quantemu.graph.tflite_import import load_tflite, nhwc_view

VECTORS = Path(__file__).resolve().parents[1] / "backends" / "tflite"
RESIZE = json.loads((VECTORS / "resize_peer_vectors.json").read_text())["cases"]
PRELU = json.loads((VECTORS / "prelu_peer_vectors.json").read_text())["cases"]
CASES = [("resize", i, c) for i, c in enumerate(RESIZE)] + [
    ("prelu", i, c) for i, c in enumerate(PRELU)
]
#: align_corners with half_pixel_centers (nearest): TensorFlow refuses the pair, ONNX has none.
BOTH_FLAGS = [c for c in CASES if c[2].get("align_corners") and c[2].get("half_pixel_centers")]
IMPORTED = [c for c in CASES if c not in BOTH_FLAGS]


def _ids(cases):
    return [
        f"{kind}{i}-{c.get('op', '')}-{int(c.get('align_corners', 0))}"
        f"{int(c.get('half_pixel_centers', 0))}"
        for kind, i, c in cases
    ]


def _ours(case: dict, x: np.ndarray) -> np.ndarray:
    """The tflite backend's output codes (NHWC) for int8 input codes ``x`` (N, H, W, C)."""
    program = quantemu.compile(load_tflite(bytes.fromhex(case["model"])), "tflite")
    out = program.graph.outputs[0]
    codes = program.run(x, keep="all").tensors[out].codes
    return nhwc_view(program.graph, out, codes)


@pytest.mark.parametrize(("kind", "index", "case"), IMPORTED, ids=_ids(IMPORTED))
def test_equal_to_litert_stored(kind, index, case):
    h, w, c = case["input_nhwc"]
    x = np.frombuffer(bytes.fromhex(case["x"]), np.int8).reshape(case["samples"], h, w, c)
    got = _ours(case, x)
    want = np.frombuffer(bytes.fromhex(case["outputs"]["litert_reference"]), np.int8)
    assert np.array_equal(got, want.reshape(got.shape))


@pytest.mark.parametrize(("kind", "index", "case"), IMPORTED[::3], ids=_ids(IMPORTED[::3]))
def test_equal_to_litert_live(kind, index, case):
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    blob = bytes.fromhex(case["model"])
    h, w, c = case["input_nhwc"]
    x = np.random.default_rng(500 + index).integers(-128, 128, (2, h, w, c), dtype=np.int8)
    it = litert.Interpreter(
        model_content=blob, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF
    )
    it.allocate_tensors()
    for sample, got in zip(x, _ours(case, x), strict=True):
        it.set_tensor(it.get_input_details()[0]["index"], sample[None])
        it.invoke()
        assert np.array_equal(it.get_tensor(it.get_output_details()[0]["index"])[0], got)


def test_imported_nodes():
    resize = load_tflite(bytes.fromhex(RESIZE[0]["model"]))
    (node,) = [n for n in resize.nodes if n.op_type == "Resize"]
    assert node.attrs["tflite_op"] == "RESIZE_NEAREST_NEIGHBOR"
    assert node.attrs["mode"] == "nearest" and node.attrs["sizes"] == ()
    h, w, _ = RESIZE[0]["input_nhwc"]
    assert resize.tensors[node.outputs[0]].shape[2:] == tuple(RESIZE[0]["size"])
    assert node.attrs["scales"][2:] == (RESIZE[0]["size"][0] / h, RESIZE[0]["size"][1] / w)
    prelu = load_tflite(bytes.fromhex(PRELU[0]["model"]))
    (node,) = [n for n in prelu.nodes if n.op_type == "PRelu"]
    slope = node.inputs[1]
    assert slope in prelu.initializers and slope in prelu.quant_overrides
    assert prelu.quant_overrides[slope].values.size == np.prod(PRELU[0]["alpha_shape"])


@pytest.mark.parametrize(("kind", "index", "case"), BOTH_FLAGS, ids=_ids(BOTH_FLAGS))
def test_align_corners_with_half_pixel_centers_is_refused(kind, index, case):
    with pytest.raises(UnsupportedError, match="align_corners together with half_pixel"):
        load_tflite(bytes.fromhex(case["model"]))
