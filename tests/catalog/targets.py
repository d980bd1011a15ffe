"""Catalog cases of the target primitives (wrong dtypes, impossible geometry, register fields
out of range), of lowering, and of conformance vector files."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import quantemu
from quantemu.backends.onednn.quantize import activation_qparams
from quantemu.errors import InvalidInputError, UnsupportedError
from tests.catalog.support import Bad, VectorRejected, _case_line, primitive, tmp, vector

E, U, V = InvalidInputError, UnsupportedError, VectorRejected


def _window(**changes) -> dict:
    return {"window": {"height": 2, "width": 1, "start_row": 0, "start_col": 0, "stride_v": 1,
                       "stride_h": 1, **changes}}  # fmt: skip


def _lbr_gru():
    from quantemu.backends.onednn import RnnParams, gru

    w = np.zeros((1, 1, 2, 3, 2), np.int8)
    x = np.zeros((1, 1, 2), np.uint8)
    return gru(x, w, w, np.ones(6, np.float32), RnnParams("avx2"), linear_before_reset=True)


def _lstm_on_nvdla():
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(size=s).astype(np.float32), n)
             for n, s in (("W", (1, 8, 3)), ("R", (1, 8, 2)))]  # fmt: skip
    node = helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=2)
    graph = helper.make_graph(
        [node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1, 1, 2])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    x = rng.normal(size=(4, 1, 3)).astype(np.float32)
    return quantemu.compile(quantemu.load_onnx(model.SerializeToString()), "nvdla", x)


def _fp16_model(node, shape):
    graph = helper.make_graph(
        [node], "fp16", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    return quantemu.load_onnx(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    )


def _nvdla_precision_typo():
    node = helper.make_node("Relu", ["x"], ["y"])
    return quantemu.compile(_fp16_model(node, [1, 2, 3, 3]), "nvdla", precision="fp32")


def _fp16_avgpool_width8_padded():
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 8], pads=[1, 0, 1, 0],
                            count_include_pad=1)  # fmt: skip
    return quantemu.compile(_fp16_model(node, [1, 2, 6, 8]), "nvdla", precision="fp16")


def _nnie_floor_pool():
    """ResNet's 3x3/2 floor-mode pool lowered directly, without NNIE's ceil rewrite."""
    from quantemu.backends.nnie.lower import lower

    w = numpy_helper.from_array(np.ones((4, 1, 3, 3), np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w],
    )  # fmt: skip
    path = tmp() / "floor_pool.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
                     .SerializeToString())  # fmt: skip
    g = quantemu.graph.optimize(quantemu.load_onnx(str(path)))
    x = np.random.default_rng(0).standard_normal((2, 1, 32, 32)).astype(np.float32)
    return lower(g, quantemu.calibrate(g, x))


def _symbolic_channels():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "C", 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    path = tmp() / "symbolic.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    return quantemu.compile(quantemu.load_onnx(str(path)), "xs3", calib=[1.0])


PRIMITIVES = (
    Bad("xs3_float_input", "float data for an int8 lib_nn operator",
        lambda: primitive("xs3", "conv2d_1x1", lambda i: {"X": i["X"].astype(np.float32)}), E,
        ("X must have dtype int8", "astype(np.int8)")),
    Bad("xs3_kernel_channels", "a kernel whose input channels differ from X's",
        lambda: primitive("xs3", "conv2d_1x1", lambda i: {"K": i["K"][:, :20]}), E,
        ("K has shape (36, 20)", "expected (36, 28)")),
    Bad("xs3_bso_groups", "a BSO array with too few channel groups",
        lambda: primitive("xs3", "conv2d_1x1", lambda i: {"BSO": i["BSO"][:1]}), E,
        ("BSO has shape (1, 7, 16)", "(3, 7, 16)", "C_out = 36")),
    Bad("xs3_window_vs_kernel", "a window taller than the kernel it describes",
        lambda: primitive("xs3", "conv2d_deep", attrs=_window(height=9)), E,
        ("K has shape (20, 2, 1, 36)", "expected (20, 9, 1, 36)")),
    Bad("xs3_zero_stride", "a zero window stride",
        lambda: primitive("xs3", "conv2d_deep", attrs=_window(stride_v=0)), E,
        ("stride_v = 0", "[1, +inf]")),
    Bad("xs3_model_variant", "an unknown XS3 arithmetic model",
        lambda: primitive("xs3", "conv2d_deep", attrs={"model": "fpga"}), E,
        ("model = 'fpga'", "host_reference")),
    Bad("xs3_shift_range", "a lib_nn shift outside 0..31",
        lambda: primitive("xs3", "fc_deepin_shallowout_8",
                          lambda i: {"shifts": np.full_like(i["shifts"], 40)}), E,
        ("= 40", "outside 0..31", "use a shift in 0..31")),
    Bad("xs3_fc_length", "an input vector shorter than the weights' rows",
        lambda: primitive("xs3", "fully_connected_8", lambda i: {"X": i["X"][:3]}), E,
        ("X has shape (3,)", "expected (4,)")),
    Bad("nvdla_precision_field", "a 2-bit register field given 7",
        lambda: primitive("nvdla", "cacc", attrs={"PROC_PRECISION": 7}), E,
        ("PROC_PRECISION = 7", "2-bit field", "0..3")),
    Bad("nvdla_truncate_field", "a 5-bit register field given 99",
        lambda: primitive("nvdla", "cacc", attrs={"CLIP_TRUNCATE": 99}), E,
        ("CLIP_TRUNCATE = 99", "0..31")),
    Bad("nvdla_shift_field", "an 8-bit shift field given 300",
        lambda: primitive("nvdla", "sdp", attrs={"BS_MUL_SHIFT_VALUE": 300}), E,
        ("BS_MUL_SHIFT_VALUE = 300", "8-bit field")),
    Bad("nvdla_unknown_field", "a register field NVDLA does not have",
        lambda: primitive("nvdla", "sdp", attrs={"BS_FOO": 1}), E,
        ("unknown field(s) BS_FOO", "the fields are")),
    Bad("nvdla_int8_range", "INT8 data holding 300",
        lambda: primitive("nvdla", "pdp_avg",
                          lambda i: {"X": np.full(i["X"].shape, 300, np.int16)}), E,
        ("INPUT_DATA = INT8", "[300, 300]", "[-128, 127]")),
    Bad("nvdla_cube_geometry", "an output cube size the pooling geometry cannot give",
        lambda: primitive("nvdla", "pdp_max", attrs={"CUBE_IN_WIDTH": 9}), E,
        ("CUBE_OUT_WIDTH", "inconsistent", "program CUBE_OUT_WIDTH")),
    Bad("onednn_isa_field", "an ISA oneDNN does not implement",
        lambda: primitive("onednn", "conv2d", attrs={"isa": "sse2"}), E, ("'sse2'", "avx2")),
    Bad("onednn_groups", "groups that do not divide the channels",
        lambda: primitive("onednn", "conv2d", attrs={"groups": 3}), E,
        ("groups = 3", "multiples of groups")),
    Bad("onednn_inner_dims", "a matmul whose inner dimensions differ",
        lambda: primitive("onednn", "matmul", lambda i: {"B": i["B"][:3]}), E,
        ("A is (1, 4) and B is (3, 1)", "must equal")),
    Bad("onednn_negative_pad", "a negative pad",
        lambda: primitive("onednn", "max_pool2d", attrs={"pads": [-1, 0, 0, 0]}), E,
        ("pads[0] = -1", "outside")),
    Bad("onednn_zero_scale", "an output scale of 0",
        lambda: primitive("onednn", "quantized_linear", attrs={"y_scale": 0.0}), E,
        ("y_scale = 0.0", "finite positive")),
    Bad("onednn_reorder_type", "a reorder to a type int8 oneDNN does not produce",
        lambda: primitive("onednn", "reorder", attrs={"dst_dt": "f64"}), E,
        ("dst_dt = 'f64'", "'s8', 'u8'")),
    Bad("onednn_range_overflow", "activations whose range is wider than float32 holds",
        lambda: activation_qparams(-3e38, 3e38), E, ("wider than float32", "weights")),
    Bad("nnie_bits", "a bit width NNIE has no mode for",
        lambda: primitive("nnie", "log_quantize", attrs={"bits": 3}), U,
        ("bits=3", "8-bit and 16-bit")),
    Bad("nnie_clip", "a negative clip", lambda: primitive("nnie", "log_quantize",
                                                          attrs={"clip": -1.0}), E,
        ("clip must be finite and > 0", "-1.0", "max|x|")),
    Bad("nnie_code_dtype", "float codes for NNIE's byte codes",
        lambda: primitive("nnie", "log_dequantize",
                          lambda i: {"code": i["code"].astype(np.float32)}), E,
        ("dtype float32", "astype(np.uint8)")),
    Bad("onednn_lstm_float_states", "float hidden states for oneDNN's u8 LSTM",
        lambda: primitive("onednn", "lstm",
                          lambda i: {"src_iter": i["src_iter"].astype(np.float32)}), E,
        ("src_iter must be a 4-D uint8 array", "numpy.uint8")),
    Bad("onednn_lstm_gate_count", "GRU weights (3 gates) given to an LSTM",
        lambda: primitive("onednn", "lstm", lambda i: {
            "weights_layer": i["weights_layer"][:, :, :, :3]}), E,
        ("weights_layer has shape", "G = 4")),
    Bad("onednn_rnn_data_scale", "an RNN data scale that is not a binary32 value",
        lambda: primitive("onednn", "gru", attrs={"data_scale": 0.1}), E,
        ("data_scale = 0.1", "not a binary32 value", "numpy.float32")),
    Bad("nvdla_conv_fp16_stride", "an FP16 convolution stride that is not an int",
        lambda: primitive("nvdla", "conv_fp16", attrs={"STRIDE_X": [2, 2]}, folder="nvdla-fp16"),
        E,
        ("stride must be an int", "[2, 2]")),
    Bad("nvdla_sdp_fp16_int8_out", "FP16 SDP processing with INT8 output",
        lambda: primitive("nvdla", "sdp", attrs={"PROC_PRECISION": 2, "OUT_PRECISION": 0}), U,
        ("OUT_PRECISION = INT8", "unconverted", "OUT_PRECISION = 1")),
    Bad("onednn_lbr_gru", "an int8 linear-before-reset GRU",
        _lbr_gru, U, ("lbr_gru", "dnnl_unimplemented", "linear_before_reset = 0")),
)  # fmt: skip

LOWERING = (
    Bad("nnie_floor_pool_lowered", "a floor-mode pool NNIE computes with ceil, lowered directly",
        _nnie_floor_pool, U, ("pool_ceil_mode", "16, 16", "NNIE's ceil", "quantemu.prepare")),
    Bad("symbolic_channels", "a model whose channel count is symbolic",
        _symbolic_channels, E, ("symbolic dimensions", "--input-shape")),
    Bad("lstm_on_nvdla", "an ONNX LSTM for a target whose toolchain has no recurrent layer",
        _lstm_on_nvdla, U, ("LSTM", "no recurrent engine", "--backend onednn")),
    Bad("nvdla_precision_value", "an NVDLA pipeline precision that does not exist",
        _nvdla_precision_typo, E, ("precision", "'fp32'", "'int8'", "'fp16'")),
    Bad("nvdla_fp16_avgpool_width8", "an FP16 average pool the cmod leaves undefined",
        _fp16_avgpool_width8_padded, U, ("KERNEL_WIDTH = 7", "kernel_width_map[8]",
                                         "kernel width of at most 7")),
)  # fmt: skip

VECTORS = (
    Bad("vector_not_json", "a vector line that is not JSON", lambda: vector("{oops"), V,
        ("invalid JSON",)),
    Bad("vector_missing_op", "a vector line without its operator",
        lambda: vector('{"id": "a", "backend": "xs3", "attrs": {}, "inputs": {}, '
                       '"expected": {}}'), V, ("missing key 'op'",)),
    Bad("vector_empty_expected", "a vector that checks nothing",
        lambda: vector('{"id": "a", "backend": "xs3", "op": "x", "attrs": {}, "inputs": {}, '
                       '"expected": {}}'), V, ("'expected' is empty",)),
    Bad("vector_bad_dtype", "a tensor with an unknown dtype",
        lambda: vector(_case_line('{"X": {"dtype": "int7", "shape": [1], "data": [1]}}')), V,
        ("int7",)),
    Bad("vector_shape_data", "a tensor whose data does not fill its shape",
        lambda: vector(_case_line('{"X": {"dtype": "int8", "shape": [3], "data": [1]}}')), V,
        ("shape",)),
    Bad("vector_out_of_dtype", "an int8 tensor holding 300",
        lambda: vector(_case_line('{"X": {"dtype": "int8", "shape": [1], "data": [300]}}')), V,
        ("300",)),
    Bad("vector_nan_literal", "a bare NaN in a vector line",
        lambda: vector('{"id": "a", "backend": "xs3", "op": "x", "attrs": {"c": NaN}}'), V,
        ("NaN is not JSON", '"nan"')),
)  # fmt: skip

CASES = (*PRIMITIVES, *LOWERING, *VECTORS)
