"""The session: one run's plans, where their ranges come from, and a failing backend."""

from __future__ import annotations

import numpy as np
import pytest
from fake_lowering import install_fake_backends

import quantemu
from quantemu.calibration.api import calibrate
from quantemu.data import demo_dataset, demo_model_path
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph import optimize
from quantemu.simulate.plan import RangeSource
from quantemu.simulate.session import Session


@pytest.fixture(scope="module")
def demo():
    x_calib = demo_dataset("calib")[0][:32]
    x, y = demo_dataset("test")
    return quantemu.load_onnx(demo_model_path()), x_calib, x[:24], y[:24]


def test_each_plan_says_where_its_ranges_came_from(demo):
    graph, x_calib, _, _ = demo
    options = {"nvdla": {"precision": "fp16"}, "onednn": {}}
    plans = Session(graph, ["nvdla", "onednn"], options).plans(x_calib)
    assert plans["nvdla"].source is RangeSource.NONE
    assert plans["onednn"].source is RangeSource.CALIBRATED
    given = calibrate(optimize(graph), x_calib, progress=False)
    plans = Session(graph, ["onednn"], ranges=given).plans(None)
    assert plans["onednn"].source is RangeSource.GIVEN
    assert plans["onednn"].ranges is given


def test_plans_and_programs_are_made_once(demo):
    graph, x_calib, x, y = demo
    session = Session(graph, ["xs3", "tflite"])
    first = session.evaluate(x_calib, x, y)
    plans = session.plans()
    session.compare(None, x, "xs3", "tflite")  # the same plans and programs, no calibration
    assert session.plans() is plans
    assert session.program("xs3") is session.program("xs3")
    assert [e.backend for e in first.evaluations] == ["xs3", "tflite"]


def test_a_failing_backend_is_recorded_and_the_others_run(demo, monkeypatch):
    graph, x_calib, x, y = demo
    install_fake_backends(monkeypatch, {"nvdla": UnsupportedError("no CDP on this chip")})
    outcome = Session(graph, ["nvdla", "onednn"], keep_going=True).evaluate(x_calib, x, y)
    assert outcome.errors == {"nvdla": "no CDP on this chip"}
    assert [e.backend for e in outcome.evaluations] == ["onednn"]
    with pytest.raises(UnsupportedError, match="no CDP"):
        Session(graph, ["nvdla", "onednn"]).evaluate(x_calib, x, y)


def test_a_model_that_needs_data_without_data_is_an_error(demo):
    graph, _, x, _ = demo
    session = Session(graph, ["onednn"])
    assert session.needs_data
    with pytest.raises(InvalidInputError, match="calibration data"):
        session.evaluate(None, x)
    assert not Session(graph, ["nvdla"], {"nvdla": {"precision": "fp16"}}).needs_data


def test_session_results_equal_compile(demo):
    graph, x_calib, x, y = demo
    outcome = Session(graph, ["onednn"], {"onednn": {"isa": "avx2"}}).evaluate(x_calib, x, y)
    prog = quantemu.compile(graph, "onednn", x_calib, isa="avx2")
    alone = prog.evaluate(x, y, batch_size=64)
    (evaluation,) = outcome.evaluations
    assert evaluation.to_dict() == alone.to_dict()
    assert np.isfinite(evaluation.layers[0].sqnr_db)
