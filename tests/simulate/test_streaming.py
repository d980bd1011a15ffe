"""``Program.run`` in bounded memory: outputs only by default, in batches; every layer's tensors
on request, up to a limit that is checked before the work."""

from __future__ import annotations

import numpy as np
import pytest

import quantemu
from quantemu.data import demo_dataset, demo_model_path
from quantemu.errors import InvalidInputError
from quantemu.intmath import parallel
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


@pytest.fixture(scope="module", params=["xs3", "nvdla", "onednn", "nnie", "tflite"])
def programs(request):
    x_calib, *_ = demo_dataset()
    return quantemu.compile(demo_model_path(), request.param, calib=x_calib[:64])


@pytest.mark.parametrize(("threads", "batch_bytes"), [(1, 1), (2, 1), (3, 1), (2, None)])
def test_batches_give_what_one_pass_gives(programs, monkeypatch, threads, batch_bytes):
    """Any split over batches, run one after the other or side by side on several threads,
    gives every output code and every counter of one pass (BATCH_BYTES = 1: batches of one
    sample)."""
    x = _x(150)
    whole = programs.run(x, keep="all")
    if batch_bytes is not None:
        monkeypatch.setattr(streaming, "BATCH_BYTES", batch_bytes)
    tasks = []
    real = parallel.map_tasks
    monkeypatch.setattr(
        parallel, "map_tasks", lambda f, items: tasks.append(len(items)) or real(f, items)
    )
    with parallel.limit_threads(threads):
        streamed = programs.run(x)
    assert sum(tasks) > threads  # the probes and then more than one batch per thread
    (out,) = programs.graph.outputs
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


def test_internals_only_on_request():
    """keep='all' keeps every layer's tensors but not their internals (accumulators);
    keep='internals' keeps both, with the same codes."""
    x = _x(4)
    program = quantemu.compile(demo_model_path(), "nvdla", calib=x)
    tensors = program.run(x, keep="all")
    both = program.run(x, keep="internals")
    assert not tensors.internals
    assert set(both.internals) == {layer.name for layer in program.lowered.layers}
    assert any("acc" in values for values in both.internals.values())
    for name, tensor in tensors.tensors.items():
        assert np.array_equal(tensor.codes, both.tensors[name].codes)
