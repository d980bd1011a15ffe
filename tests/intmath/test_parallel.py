"""The chunked, multi-threaded paths against the Python-int references, with ==.

Large arrays are split across threads (quantemu.intmath.parallel). Here the chunk size is made
tiny, so that short hypothesis arrays are split into several chunks, each taking its own fast or
exact path; the results must still equal the references element by element.
"""

from __future__ import annotations

import contextlib
import multiprocessing

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantemu.errors import InvalidInputError
from quantemu.intmath import fixedpoint, floatconv, parallel, reference, rounding, saturation
from tests.intmath.strategies import (
    INT64_MAX,
    INT64_MIN,
    apply_reference,
    int_arrays,
    shifts,
)
from tests.intmath.test_rounding import NAMES as ROUNDING

CLAMPS = ["saturate", "saturate_symmetric", "saturate_unsigned"]


@contextlib.contextmanager
def split(threads: int = 3, min_chunk: int = 2):
    """Arrays of ``2 * min_chunk`` elements or more are split over ``threads`` threads."""
    saved = parallel.MIN_CHUNK
    parallel.MIN_CHUNK = min_chunk
    try:
        with parallel.limit_threads(threads):
            yield
    finally:
        parallel.MIN_CHUNK = saved


def test_split_really_splits():
    with split():
        assert parallel.chunk_count(4) == 2
        assert parallel.chunk_count(100) == 3
        assert parallel.chunk_count(3) == 1
    assert parallel.chunk_count(4) == 1  # restored


LONG = st.integers(4, 24)


@pytest.mark.parametrize("name", ROUNDING)
@given(data=st.data())
def test_rounding_chunks(name, data):
    """int64 arrays (every chunk scans its own range: rails in one chunk only send that chunk
    down the exact path) and int32 arrays (rounded in place in their int64 copy)."""
    dtype = data.draw(st.sampled_from([np.int64, np.int32]))
    x = data.draw(int_arrays(dtype, min_size=4, max_size=24))
    s = data.draw(shifts(0, 66))
    ref = getattr(reference, name)
    with split():
        got = getattr(rounding, name)(x, s)
    assert got.dtype == np.int64
    assert got.tolist() == [ref(int(v), s) for v in x]


@pytest.mark.parametrize("name", ROUNDING)
def test_rounding_one_chunk_near_the_rail(name):
    """Only the last chunk holds values whose biased add would overflow: it alone takes the
    exact path, the others the biased shift; 2-D input is split through its flat view."""
    x = np.arange(-48, 48, dtype=np.int64).reshape(8, 12) * 1001
    x[-1, -3:] = [INT64_MAX, INT64_MAX - 1, INT64_MIN]
    ref = getattr(reference, name)
    for s in (1, 7, 62):
        with split(threads=4, min_chunk=8):
            got = getattr(rounding, name)(x, s)
        assert got.tolist() == [[ref(int(v), s) for v in row] for row in x.tolist()], s


@pytest.mark.parametrize(
    "name", ["multiply_shift_right_round_half_up", "multiply_shift_right_round_half_away"]
)
@given(data=st.data())
def test_multiply_chunks(name, data):
    """Same-shape operands of any signed width; a chunk whose product could leave int64 sends
    the whole call down the general path (object results where they do not fit)."""
    a = data.draw(
        int_arrays(
            data.draw(st.sampled_from([np.int64, np.int32, np.int16])), min_size=4, max_size=20
        )
    )
    b_dtype = data.draw(st.sampled_from([np.int64, np.int32, np.int16, np.uint8]))
    b = data.draw(int_arrays(b_dtype, min_size=a.size, max_size=a.size))
    s = data.draw(st.integers(0, 62))
    expected = apply_reference(getattr(reference, name), a, b, s)
    with split():
        got = getattr(fixedpoint, name)(a, b, s)
    fits = all(INT64_MIN <= v <= INT64_MAX for v in expected)
    assert got.dtype == (np.int64 if fits else object)
    assert got.tolist() == expected


@given(data=st.data())
def test_clamp_and_wrap_chunks(data):
    x = data.draw(
        int_arrays(data.draw(st.sampled_from([np.int64, np.int16])), min_size=4, max_size=24)
    )
    bits = data.draw(st.sampled_from([1, 8, 16, 31, 32, 63, 64]))
    xs = [int(v) for v in x]
    with split():
        for name in CLAMPS:
            want = [getattr(reference, name)(v, bits) for v in xs]
            assert getattr(saturation, name)(x, bits).tolist() == want, name
            y, n = getattr(saturation, f"{name}_count")(x, bits)
            assert (y.tolist(), n) == (want, sum(w != v for w, v in zip(want, xs, strict=True)))
        assert saturation.wrap(x, bits).tolist() == [reference.wrap(v, bits) for v in xs]


@given(
    xs=st.lists(
        st.floats(width=32, allow_nan=False) | st.integers(-300, 300).map(lambda k: k / 2),
        min_size=4,
        max_size=24,
    ),
    bits=st.sampled_from([1, 8, 16, 22]),
    signed=st.booleans(),
)
def test_float32_conversion_chunks(xs, bits, signed):
    name = "float32_to_int_round_half_even_saturate"
    want = [getattr(reference, name)(v, bits, signed=signed) for v in xs]
    with split():
        got = getattr(floatconv, name)(np.array(xs, dtype=np.float32), bits, signed=signed)
    assert got.tolist() == want


@given(
    xs=st.lists(
        st.floats(-(2.0**31), 2.0**31, allow_nan=False)
        | st.integers(-300, 300).map(lambda k: k / 2),
        min_size=4,
        max_size=24,
    ),
    bits=st.sampled_from([8, 16, 32, 64]),
)
def test_float64_conversion_chunks(xs, bits):
    name = "float64_to_int_round_half_away_add_truncate"
    want = [getattr(reference, name)(v, bits=bits) for v in xs]
    with split():
        got = getattr(floatconv, name)(np.array(xs), bits=bits)
    assert got.tolist() == want


def test_results_do_not_depend_on_the_thread_count():
    rng = np.random.default_rng(1)
    x = rng.integers(INT64_MIN, INT64_MAX, 1000, dtype=np.int64, endpoint=True)
    x[::97] = INT64_MAX
    results = []
    for threads in (1, 2, 3, 5):
        with split(threads=threads, min_chunk=16):
            results.append([rounding.shift_right_round_half_away(x, 5), saturation.wrap(x, 12)])
    for r in results[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(r, results[0], strict=True))


def test_a_failing_chunk_raises_after_all_chunks_finished():
    out = np.zeros(12, dtype=np.int64)
    x = np.arange(12, dtype=np.int64)

    def kernel(o, xc):
        if xc[0] == 0:
            raise ValueError("first chunk")
        o[...] = xc

    with split(threads=3, min_chunk=4), pytest.raises(ValueError, match="first chunk"):
        parallel.map_chunks(kernel, out, x)
    assert out[4:].tolist() == x[4:].tolist()  # the other chunks were not abandoned halfway


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_set_threads_rejects_bad_counts(bad):
    with pytest.raises(InvalidInputError, match="positive int or None"):
        parallel.set_threads(bad)


def test_set_threads_and_limit_threads_restore():
    saved = parallel._state["threads"]
    try:
        parallel._state["threads"] = None
        assert parallel.set_threads(2) is None  # the previous setting: the default
        assert parallel.threads() == 2
        with parallel.limit_threads(1):
            assert parallel.threads() == 1
        assert parallel.threads() == 2
        assert parallel.set_threads(None) == 2
        assert parallel.threads() >= 1
    finally:
        parallel._state["threads"] = saved


def _child_rounds(queue):
    with split(threads=2, min_chunk=4):
        y = rounding.shift_right_round_half_up(np.arange(16, dtype=np.int64), 1)
    queue.put(y.tolist())


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_pool_works_in_a_forked_child():
    """A child inherits the pool object but none of its threads: it must make its own."""
    with split(threads=2, min_chunk=4):
        rounding.shift_right_round_half_up(np.arange(16, dtype=np.int64), 1)  # pool exists
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_rounds, args=(queue,))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hung on the inherited thread pool")
    assert child.exitcode == 0
    assert queue.get(timeout=5) == [reference.shift_right_round_half_up(v, 1) for v in range(16)]


def test_map_tasks_keeps_order_and_runs_each_task_on_one_thread():
    """Results in item order, whatever order they finish in; within a task threads() is 1 and
    a nested map_tasks runs in turn; BLAS is held to one thread only while tasks run."""
    import threading
    import time

    from threadpoolctl import threadpool_info

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    seen = set()

    def task(i):
        time.sleep(0.01 * (5 - i))  # the first items finish last
        seen.add(threading.get_ident())
        nested = parallel.map_tasks(lambda j: parallel.threads(), [0, 1])
        return i, parallel.threads(), nested, blas_threads()

    with parallel.limit_threads(3):
        got = parallel.map_tasks(task, range(5))
    assert [g[0] for g in got] == list(range(5))
    assert all(g[1] == 1 and g[2] == [1, 1] for g in got)
    assert all(set(g[3]) <= {1} for g in got)
    assert len(seen) > 1
    assert blas_threads() == before


def test_map_tasks_raises_the_first_error_after_the_others_end():
    def task(i):
        if i in (1, 3):
            raise ValueError(f"item {i}")
        return i

    with parallel.limit_threads(2), pytest.raises(ValueError, match="item 1"):
        parallel.map_tasks(task, range(6))
    with parallel.limit_threads(1):
        assert parallel.map_tasks(lambda i: i * 2, range(3)) == [0, 2, 4]
        assert parallel.threads() == 1
