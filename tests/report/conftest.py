"""Evaluations for the report tests: one hand-made with every corner case, and real ones.

``evaluation`` is built by hand (an exact layer with +inf SQNR, a float fallback with -inf SQNR
and a note with markup characters, a saturating layer). ``demo_evaluations`` are what
``quantemu.compile`` and ``Program.evaluate`` give on the bundled demo model (xs3 and nvdla, a
slice of the test split), so the reports are also checked on what users see.
"""

from __future__ import annotations

import math

import pytest

import quantemu
from quantemu.data import demo_dataset, demo_model_path
from quantemu.simulate import Evaluation
from tests.report.helpers import layer

DEMO_BACKENDS = ("xs3", "nvdla")
DEMO_SAMPLES = 64


@pytest.fixture
def evaluation() -> Evaluation:
    """Three layers: exact with inf SQNR, a float fallback with a note, a saturating one."""
    return Evaluation(
        backend="xs3",
        header={"variant": "lib_nn", "rounding": "ties toward +inf", "quantemu": "0.1.0"},
        layers=(
            layer("stem <conv>", sqnr_db=math.inf, max_abs_lsb=0, fraction_off=0.0),
            layer(
                "softmax",
                op="float:Softmax",
                exact=False,
                note="Softmax falls back to float & stays there",
                counters={},
                sqnr_db=-math.inf,
            ),
            layer(
                "fc",
                op="fully_connected",
                sqnr_db=12.5,
                max_abs_lsb=40,
                lsb_histogram=(5,) + (0,) * 5 + (10, 100, 780, 100, 10) + (0,) * 5 + (7,),
                counters={"acc_saturation": 17, "output_saturation": 0},
            ),
        ),
        samples=20,
        float_accuracy=0.95,
        backend_accuracy=0.9,
        agreement=0.85,
    )


@pytest.fixture(scope="session")
def demo_evaluations() -> list[Evaluation]:
    """The demo model compiled for :data:`DEMO_BACKENDS` and evaluated with labels."""
    graph = quantemu.load_onnx(demo_model_path())
    calib, _ = demo_dataset("calib")
    x, y = demo_dataset("test")
    return [
        quantemu.compile(graph, backend, calib).evaluate(x[:DEMO_SAMPLES], y[:DEMO_SAMPLES])
        for backend in DEMO_BACKENDS
    ]
