"""``Program.run`` in bounded memory: outputs only by default, in batches; every layer's tensors
on request, up to a limit that is checked before the work."""

from __future__ import annotations

import numpy as np
import pytest

import quantemu
from quantemu.data import demo_dataset, demo_model_path
from quantemu.errors import InvalidInputError
from quantemu.simulate import streaming


@pytest.fixture(scope="module")
def program():
    x_calib, *_ = demo_dataset()
    return quantemu.compile(demo_model_path(), "xs3", calib=x_calib[:64])


def _x(n: int) -> np.ndarray:
    x, *_ = demo_dataset()
    return np.resize(x, (n, *x.shape[1:])).astype(np.float32)


def test_default_keeps_outputs_and_says_how_to_keep_the_rest(program):
    result = program.run(_x(20))
    (out,) = program.graph.outputs
    assert set(result.tensors) == {out}
    assert set(result.counters) == {layer.name for layer in program.lowered.layers}
    hidden = program.lowered.layers[0].output
    with pytest.raises(InvalidInputError, match=r"not kept.*keep='all'"):
        result.tensors[hidden]


def test_batches_give_what_one_pass_gives(program, monkeypatch):
    x = _x(300)
    whole = program.run(x, keep="all")
    monkeypatch.setattr(streaming, "BATCH_BYTES", 1)  # the smallest batches: PROBE samples
    streamed = program.run(x)
    (out,) = program.graph.outputs
    assert np.array_equal(streamed.tensors[out].codes, whole.tensors[out].codes)
    assert np.array_equal(streamed.outputs[out], whole.outputs[out])
    assert streamed.counters == {k: dict(v) for k, v in whole.counters.items()}


def test_keep_all_beyond_the_limit_is_refused_before_the_work(program, monkeypatch):
    monkeypatch.setattr(streaming, "KEEP_ALL_LIMIT", 100_000)
    with pytest.raises(InvalidInputError, match=r"5,000 samples needs about .*keep='outputs'"):
        program.run(_x(5000), keep="all")
    assert program.run(_x(5000)).outputs  # the default still runs


def test_bad_keep_value(program):
    with pytest.raises(InvalidInputError, match=r"keep = 'everything'; choose 'outputs'"):
        program.run(_x(2), keep="everything")


def test_elements_per_sample_counts_flattened_batches():
    assert streaming.elements_per_sample([("N", 3, 4), ("N*16", 8), (10,)]) == 12 + 128 + 10
