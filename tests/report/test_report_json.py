"""The JSON report: strict JSON, non-finite floats as strings, and an exact round trip."""

from __future__ import annotations

import json
import math

import pytest

from quantemu.report import (
    evaluation_from_dict,
    evaluation_to_dict,
    load_json,
    read_json,
    to_json,
    write_json,
)
from quantemu.simulate import Evaluation
from tests.report.helpers import layer


def _strict_loads(text: str):
    def reject(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=reject)


def test_json_is_strict_and_round_trips(evaluation, tmp_path):
    path = tmp_path / "out.json"
    write_json([evaluation], path, model="m.onnx")
    document = _strict_loads(path.read_text())
    assert document["format"] == "quantemu-evaluation" and document["model"] == "m.onnx"
    layers = document["evaluations"][0]["layers"]
    assert [entry["sqnr_db"] for entry in layers] == ["inf", "-inf", 12.5]
    assert document["evaluations"][0]["counters"] == {
        "acc_saturation": 17,
        "output_saturation": 3,
    }
    (back,) = read_json(path)
    assert back == evaluation
    assert math.isinf(back.layers[0].sqnr_db) and back.layers[0].sqnr_db > 0


def test_demo_evaluations_round_trip_exactly(demo_evaluations, tmp_path):
    path = tmp_path / "demo.json"
    write_json(demo_evaluations, path, model="digits_cnn.onnx", errors={"nnie": "skipped"})
    document = _strict_loads(path.read_text())
    assert [ev["backend"] for ev in document["evaluations"]] == [
        ev.backend for ev in demo_evaluations
    ]
    assert document["errors"] == {"nnie": "skipped"}
    assert read_json(path) == demo_evaluations
    for ev, written in zip(demo_evaluations, document["evaluations"], strict=True):
        assert written["samples"] == ev.samples
        assert [entry["name"] for entry in written["layers"]] == [s.name for s in ev.layers]
        assert written["counters"] == {k: int(v) for k, v in ev.counter_totals().items()}


def test_json_to_stdout(evaluation, capsys):
    write_json([evaluation], "-")
    (back,) = load_json(_strict_loads(capsys.readouterr().out))
    assert back == evaluation


def test_json_without_labels_and_nan(evaluation):
    odd = Evaluation(
        **{
            **evaluation.__dict__,
            "float_accuracy": None,
            "backend_accuracy": None,
            "layers": (layer("x", cosine=math.nan),),
        }
    )
    document = _strict_loads(json.dumps(to_json([odd]), allow_nan=False))
    ev = document["evaluations"][0]
    assert ev["float_accuracy"] is None and ev["layers"][0]["cosine"] == "nan"
    (back,) = load_json(document)
    assert back.float_accuracy is None and math.isnan(back.layers[0].cosine)


def test_json_malformed_documents_are_clear_errors(evaluation):
    with pytest.raises(ValueError, match="not a quantemu evaluation document"):
        load_json({"format": "other"})
    with pytest.raises(ValueError, match="version 2; this quantemu reads version 1"):
        load_json({**to_json([evaluation]), "version": 2})
    broken = evaluation_to_dict(evaluation)
    del broken["layers"][0]["sqnr_db"]
    with pytest.raises(ValueError, match="missing or malformed field: 'sqnr_db'"):
        evaluation_from_dict(broken)
    broken = evaluation_to_dict(evaluation)
    broken["layers"][2]["sqnr_db"] = "big"
    with pytest.raises(ValueError, match="layer 'fc' sqnr_db: expected a number"):
        evaluation_from_dict(broken)
    broken = evaluation_to_dict(evaluation)
    broken["agreement"] = True  # a bool is not a number here
    with pytest.raises(ValueError, match="evaluation agreement: expected a number"):
        evaluation_from_dict(broken)
