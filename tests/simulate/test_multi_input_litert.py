"""A two-input int8 TFLite model on ``quantemu run`` against LiteRT's reference kernels, live.

The model is one ADD of ``x`` and ``bias``, both ``(N, 8)`` (shape signature ``-1`` on the
batch), written with LiteRT's flatbuffer schema as TensorFlow's converter writes an int8 ADD (the
test builds it: it is three tensors). (The TFLite importer takes dimension 0 of every input for
the batch, so a TFLite input without a batch is not expressible yet.) The
evaluation .npz holds float values on the inputs' grids, so that the input quantization gives
the codes LiteRT is fed; the codes ``--save-outputs`` writes must equal LiteRT's, sample for
sample. Skips where ai-edge-litert is missing.
"""

from __future__ import annotations

import numpy as np
import pytest

from quantemu.cli import main

litert = pytest.importorskip("ai_edge_litert.interpreter")
fb = pytest.importorskip("ai_edge_litert.schema_py_generated")
flatbuffers = pytest.importorskip("flatbuffers")

pytestmark = pytest.mark.peer

# (scale, zero point) of x, bias and the sum: unequal, so that ADD rescales both inputs
QUANT = {"x": (0.05, 3), "bias": (0.021, -7), "y": (0.066, -2)}


def _tensor(name, shape, signature, quant):
    t = fb.TensorT()
    t.name, t.shape, t.shapeSignature, t.type, t.buffer = name, shape, signature, 9, 0  # INT8
    q = fb.QuantizationParametersT()
    q.scale, q.zeroPoint = [quant[0]], [quant[1]]
    t.quantization = q
    return t


def _add_model() -> bytes:
    opcode = fb.OperatorCodeT()
    opcode.builtinCode = opcode.deprecatedBuiltinCode = fb.BuiltinOperator.ADD
    opcode.version = 1
    op = fb.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, [0, 1], [2]
    op.builtinOptionsType = fb.BuiltinOptions.AddOptions
    op.builtinOptions = fb.AddOptionsT()
    sg = fb.SubGraphT()
    sg.tensors = [
        _tensor("x", [1, 8], [-1, 8], QUANT["x"]),
        _tensor("bias", [1, 8], [-1, 8], QUANT["bias"]),
        _tensor("y", [1, 8], [-1, 8], QUANT["y"]),
    ]
    sg.operators, sg.inputs, sg.outputs, sg.name = [op], [0, 1], [2], "main"
    model = fb.ModelT()
    model.version, model.operatorCodes, model.subgraphs = 3, [opcode], [sg]
    model.buffers, model.description = [fb.BufferT()], "quantemu tests: two-input ADD"
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _litert(content: bytes, x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    it = litert.Interpreter(
        model_content=content, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF
    )
    it.allocate_tensors()
    ins = {d["name"]: d["index"] for d in it.get_input_details()}
    out = it.get_output_details()[0]["index"]
    codes = []
    for sample, sample_bias in zip(x, bias, strict=True):  # batch 1: one invoke per sample
        it.set_tensor(ins["x"], sample[None])
        it.set_tensor(ins["bias"], sample_bias[None])
        it.invoke()
        codes.append(it.get_tensor(out)[0])
    return np.stack(codes)


def _on_grid(codes: np.ndarray, name: str) -> np.ndarray:
    scale, zero_point = QUANT[name]
    return ((codes.astype(np.float64) - zero_point) * scale).astype(np.float32)


def test_two_input_add_equals_litert(tmp_path, capsys):
    content = _add_model()
    (tmp_path / "add2.tflite").write_bytes(content)
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (50, 8), dtype=np.int8)
    bias = rng.integers(-128, 128, (50, 8), dtype=np.int8)
    x[:2], bias[:2] = [[-128] * 8, [127] * 8], [[-128] * 8, [127] * 8]  # the extremes
    np.savez(tmp_path / "feeds.npz", x=_on_grid(x, "x"), bias=_on_grid(bias, "bias"))
    code = main([
        "run", str(tmp_path / "add2.tflite"), "--backend", "tflite", "--eval",
        str(tmp_path / "feeds.npz"), "--save-outputs", str(tmp_path / "codes.npz"), "-q",
    ])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    with np.load(tmp_path / "codes.npz") as saved:
        np.testing.assert_array_equal(saved["y"], _litert(content, x, bias))
