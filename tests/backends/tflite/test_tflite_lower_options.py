"""The TFLite-family context protocol and typed options at ``lower()``."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from quantemu.backends.tflite.lower import lower
from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.tflite.lower.options import Options, TfliteFamilyOptions
from quantemu.backends.tflite.params import TfliteRuntime
from quantemu.backends.xs3.lower.options import Options as Xs3Options
from quantemu.calibration.ranges import CalibrationRanges
from quantemu.data import demo_model_path
from quantemu.errors import InvalidInputError
from quantemu.graph import load_onnx, optimize
from quantemu.program.options import LoweringOptions


@pytest.mark.parametrize("options", [Options(), Xs3Options()], ids=["tflite", "xs3"])
def test_every_tflite_family_target_supplies_the_protocol(options):
    assert isinstance(options, TfliteFamilyOptions)
    assert isinstance(options.kernel_runtime, TfliteRuntime)
    assert isinstance(options.missing_builtins, frozenset)


def test_xmos_host_interpreter_lacks_what_it_lacks():
    assert Options.from_mapping({"runtime": "xmos_tflite_micro"}).missing_builtins == {
        "BATCH_MATMUL",
        "SQUARED_DIFFERENCE",
    }
    assert Options.from_mapping({"runtime": "tflite_micro"}).missing_builtins == frozenset()


def test_options_without_the_protocol_are_refused_by_name():
    @dataclass(frozen=True)
    class Bare(LoweringOptions):
        @property
        def kernel_runtime(self) -> TfliteRuntime:
            return TfliteRuntime.TFLITE_MICRO

    graph = optimize(load_onnx(demo_model_path()))
    with pytest.raises(TypeError, match="inplace_calibration"):
        TfliteContext(graph, CalibrationRanges({}, observer="minmax"), Bare())


def test_lower_takes_typed_options_only():
    graph = optimize(load_onnx(demo_model_path()))
    with pytest.raises(InvalidInputError, match=r"typed options.*from_mapping"):
        lower(graph, CalibrationRanges({}, observer="minmax"), {"runtime": "tflite_micro"})
