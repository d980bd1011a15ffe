"""Catalog cases of the Python API: model files, compile options, calibration, ranges files,
run / run_feeds / evaluate data, labels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import quantemu
from quantemu.calibration.ranges import CalibrationRanges
from quantemu.data import demo_model_path
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import load_onnx
from tests.catalog.support import ROOT, Bad, compile_demo, data, program, tmp, with_value, write, x

E, U = InvalidInputError, UnsupportedError
DEMO = demo_model_path()
ADD_TFLITE = ROOT / "tests" / "data" / "tflite_refs" / "add.int8.tflite"


def _ranges_doc(tensors) -> str:
    return json.dumps({"format": "quantemu-ranges", "version": 1, "observer": "minmax",
                       "tensors": tensors})  # fmt: skip


FILES = (
    Bad("onnx_missing", "an ONNX path that does not exist",
        lambda: quantemu.load_onnx(str(tmp() / "none.onnx")), E,
        ("cannot read ONNX model", "none.onnx", "No such file")),
    Bad("onnx_not_onnx", "a text file named .onnx",
        lambda: quantemu.load_onnx(write("t.onnx", "hello")), E,
        ("not a valid ONNX model", "not an ONNX file")),
    Bad("onnx_empty", "an empty .onnx file", lambda: quantemu.load_onnx(write("e.onnx", "")), E,
        ("not a valid ONNX model", "no graph")),
    Bad("onnx_truncated", "an ONNX file cut short",
        lambda: quantemu.load_onnx(write("cut.onnx", Path(DEMO).read_bytes()[:300])), E,
        ("not a valid ONNX model", "truncated")),
    Bad("tflite_not_flatbuffer", "a .tflite file that is not a flatbuffer",
        lambda: quantemu.load_tflite(write("g.tflite", b"\0" * 64)), E,
        ("not a TFLite flatbuffer", "TFL3", "int8 .tflite")),
    Bad("tflite_truncated", "a TFLite file cut short",
        lambda: quantemu.load_tflite(write("cut.tflite", ADD_TFLITE.read_bytes()[:200])), E,
        ("malformed or truncated", "re-export")),
    Bad("tflite_missing", "a .tflite path that does not exist",
        lambda: quantemu.load_model(str(tmp() / "none.tflite")), E,
        ("cannot read TFLite model", "none.tflite")),
)  # fmt: skip

COMPILE = (
    Bad("backend_unknown", "a backend name quantemu does not have",
        lambda: compile_demo("tpu"), E, ("unknown backend 'tpu'", "xs3", "nnie")),
    Bad("option_unknown", "an option the backend does not have",
        lambda: compile_demo("xs3", foo=1), E, ("unknown option(s) 'foo'", "the options are")),
    Bad("option_isa", "an ISA oneDNN has no int8 kernels for",
        lambda: compile_demo("onednn", isa="sse2"), E, ("isa = 'sse2'", "avx2")),
    Bad("option_xs3_model", "an XS3 model variant that does not exist",
        lambda: compile_demo("xs3", model="fpga"), E, ("model = 'fpga'", "host_reference")),
    Bad("option_threshold_toolchain", "xcore-opt's threshold with the older toolchain",
        lambda: compile_demo("xs3", toolchain="tflite2xcore", conv_err_threshold=0.5), E,
        ("conv_err_threshold", "toolchain=xformer")),
    Bad("option_threshold_negative", "a negative xcore-opt error threshold",
        lambda: compile_demo("xs3", conv_err_threshold=-1), E, ("= -1", ">= 0")),
    Bad("option_nvdla_weights", "an NVDLA weight granularity that does not exist",
        lambda: compile_demo("nvdla", weights="x"), E, ("weights = 'x'", "per_kernel")),
    Bad("option_nnie_clip", "an NNIE clip selection that does not exist",
        lambda: compile_demo("nnie", clip_selection="x"), E, ("clip_selection = 'x'", "max_abs")),
    Bad("option_tflite_runtime", "a TFLite runtime that is not emulated",
        lambda: compile_demo("tflite", runtime="android"), E,
        ("runtime = 'android'", "tflite_micro")),
    Bad("option_tflite_optimized", "LiteRT's optimized kernels (not emulated yet)",
        lambda: compile_demo("tflite", kernels="optimized"), U,
        ("not emulated yet", "kernels=reference")),
    Bad("option_bool", "a yes/no option given something else",
        lambda: compile_demo("xs3", toolchain="tflite2xcore", symmetric_saturation="perhaps"), E,
        ("symmetric_saturation = 'perhaps'", "true or false")),
    Bad("compile_without_data", "compile with neither calibration data nor ranges",
        lambda: quantemu.compile(DEMO, "xs3"), E, ("calib=", "CalibrationRanges.load")),
    Bad("ranges_missing_tensor", "ranges that lack a tensor of the model",
        lambda: compile_demo("xs3", calib=None,
                             calibration=CalibrationRanges({}, observer="minmax")), E,
        ("no calibrated range", "quantemu.calibrate")),
)  # fmt: skip

CALIBRATION = (
    Bad("calib_shape", "calibration data of another shape",
        lambda: compile_demo(calib=np.zeros((2, 3, 8, 8), np.float32)), E,
        ("2x3x8x8", "expects")),
    Bad("calib_integer", "integer calibration data for a float model",
        lambda: compile_demo(calib=np.zeros((2, 1, 8, 8), np.int64)), E,
        ("dtype int64", "astype(np.float32)")),
    Bad("calib_strings", "strings as calibration data",
        lambda: compile_demo(calib=np.array(["a", "b"])), E, ("dtype <U1", "must be float")),
    Bad("calib_nan", "NaN in calibration data", lambda: compile_demo(calib=with_value(np.nan)), E,
        ("sample 3", "(0, 2, 5)", "NaN", "np.nan_to_num")),
    Bad("calib_inf", "+Inf in calibration data", lambda: compile_demo(calib=with_value(np.inf)),
        E, ("sample 3", "+Inf")),
    Bad("calib_empty", "zero calibration samples", lambda: compile_demo(calib=x(0)), E,
        ("no samples", "(0, 1, 8, 8)")),
    Bad("observer_unknown", "an observer that does not exist",
        lambda: quantemu.calibrate(load_onnx(DEMO), x(4), observer="foo"), E,
        ("unknown observer 'foo'", "minmax")),
    Bad("percentile_range", "a percentile above 100",
        lambda: quantemu.calibrate(load_onnx(DEMO), x(4), observer="percentile", percentile=120),
        E, ("percentile", "120", "(50, 100]")),
    Bad("ranges_not_json", "a ranges file that is not JSON",
        lambda: CalibrationRanges.load(write("r.json", "{")), E, ("not a UTF-8 JSON ranges",)),
    Bad("ranges_not_ranges", "a JSON file that is not a ranges document",
        lambda: CalibrationRanges.load(write("r2.json", '{"format": "x"}')), E,
        ("not a quantemu ranges document", "quantemu-ranges")),
    Bad("ranges_missing", "a ranges path that does not exist",
        lambda: CalibrationRanges.load(str(tmp() / "nope.json")), E,
        ("cannot read ranges file", "nope.json")),
    Bad("ranges_bad_value", "a ranges document with a non-numeric minimum",
        lambda: CalibrationRanges.load(write("r3.json", _ranges_doc({"x": {"min": "a"}}))),
        E, ("tensor 'x'", "min must be a number", "'a'")),
)  # fmt: skip

RUN = (
    Bad("run_nan", "NaN in the data to run", lambda: program().run(with_value(np.nan)), E,
        ("input 'input'", "sample 3", "NaN", "np.nan_to_num")),
    Bad("run_inf", "+Inf in the data to run", lambda: program().run(with_value(np.inf)), E,
        ("sample 3", "+Inf", "clean the data")),
    Bad("run_neg_inf_nnie", "-Inf in the data, on NNIE (once accepted silently)",
        lambda: program("nnie").run(with_value(-np.inf)), E, ("sample 3", "-Inf")),
    Bad("run_empty", "zero samples", lambda: program().run(x(0)), E,
        ("holds no samples", "at least one sample")),
    Bad("run_nhwc", "NHWC data for an NCHW model", lambda: program().run(np.zeros((2, 8, 8, 1))),
        E, ("expected shape (N, 1, 8, 8)", "(2, 8, 8, 1)", "model's layout")),
    Bad("run_no_batch_axis", "one sample without its batch axis",
        lambda: program().run(np.zeros((1, 8, 8), np.float32)), E,
        ("got (1, 8, 8)", "batch first")),
    Bad("run_complex", "complex data", lambda: program().run(x(2).astype(np.complex64)), E,
        ("dtype complex64", "np.float32")),
    Bad("run_strings", "strings as data", lambda: program().run(np.array([["a"]])), E,
        ("dtype <U1", "numeric NumPy array")),
    Bad("run_codes_float_model", "int8 codes for a model that takes float data",
        lambda: program().run(np.zeros((2, 1, 8, 8), np.int8)), E,
        ("integer data of dtype int8", "takes float data")),
    Bad("run_keep", "an unknown keep= choice", lambda: program().run(x(2), keep="everything"), E,
        ("keep = 'everything'", "'outputs'", "'all'")),
    Bad("run_not_kept", "reading a layer's tensor that run() did not keep",
        lambda: program().run(x(2)).tensors["conv1"], E, ("'conv1' was not kept", "keep='all'")),
    Bad("run_internals_not_kept", "reading a layer's internals that run() did not keep",
        lambda: program().run(x(2), keep="all").internals["conv1"], E,
        ("internals of layer 'conv1' were not kept", "keep='internals'")),
    Bad("feeds_unknown_name", "run_feeds with a wrong input name",
        lambda: program().run_feeds({"image": x(2)}), E,
        ("unknown input name(s) ['image']", "'input'")),
    Bad("feeds_not_dict", "run_feeds with an array instead of a dict",
        lambda: program().run_feeds(x(2)), E, ("takes a dict", "run(x)")),
    Bad("evaluate_empty", "evaluate on zero samples", lambda: program().evaluate(x(0)), E,
        ("holds no samples",)),
    Bad("evaluate_nan", "NaN in evaluation data", lambda: program().evaluate(with_value(np.nan)),
        E, ("sample 3", "NaN")),
    Bad("evaluate_batch_size", "a batch size of 0", lambda: program().evaluate(x(), batch_size=0),
        E, ("batch_size", "positive", "0")),
)  # fmt: skip

LABELS = (
    Bad("labels_negative", "negative labels",
        lambda: program().evaluate(x(), -np.ones(8, np.int64)), E,
        ("label 0 is -1", "10 classes (0..9)", "class indices")),
    Bad("labels_too_large", "labels beyond the output's classes",
        lambda: program().evaluate(x(), np.full(8, 10)), E, ("label 0 is 10", "classes (0..9)")),
    Bad("labels_length", "fewer labels than samples",
        lambda: program().evaluate(x(), data()[1][:5]), E, ("one label per sample (8)", "(5,)")),
    Bad("labels_fractional", "fractional labels",
        lambda: program().evaluate(x(), data()[1][:8] + 0.5), E,
        ("not an integer class index",)),
    Bad("labels_one_hot", "one-hot labels",
        lambda: program().evaluate(x(), np.eye(10)[data()[1][:8]]), E,
        ("one-hot", "argmax(axis=1)")),
)  # fmt: skip

CASES = (*FILES, *COMPILE, *CALIBRATION, *RUN, *LABELS)
