"""``compare_backends`` (``quantemu run --against``) runs batches side by side and compares them
in batch order: its report is the same on any number of threads."""

from __future__ import annotations

from dataclasses import asdict

import quantemu
from quantemu.data import demo_dataset, demo_model_path
from quantemu.intmath import parallel
from quantemu.simulate.session import compare_backends


def test_disagreement_is_the_same_on_any_number_of_threads():
    graph = quantemu.load_onnx(demo_model_path())
    calib = demo_dataset("calib")[0]
    x = demo_dataset("test")[0][:100]
    with parallel.limit_threads(1):
        one = compare_backends(graph, ("xs3", "tflite"), calib, x, batch_size=16)
    with parallel.limit_threads(3):
        many = compare_backends(graph, ("xs3", "tflite"), calib, x, batch_size=16)
    assert asdict(one) == asdict(many)
    assert any(row.differing for row in one.layers)  # the comparison has something to say
    assert all(row.first is None or row.first[0] < 100 for row in one.layers)
