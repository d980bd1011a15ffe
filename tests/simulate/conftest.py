"""Fixtures for the simulation front end, report and command tests.

``fake_backends`` replaces every backend's lowering with :mod:`fake_lowering` (float layers,
int8 outputs), so these tests do not depend on which real lowerings exist; ``evaluation`` is a
hand-made :class:`~quantemu.simulate.Evaluation` with the corner cases reports must handle.
"""

from __future__ import annotations

import math

import pytest
from fake_lowering import fake_lowering_module
from stats_helpers import layer

from quantemu.simulate import Evaluation


@pytest.fixture
def fake_backends(monkeypatch):
    """Every backend lowers through the fake lowering for the test's duration."""
    monkeypatch.setattr("quantemu.simulate.compile.lowering_module", fake_lowering_module)


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
