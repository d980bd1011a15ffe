"""An int8 GEMM engine: u8 x s8 products summed in int32 by the CPU's int8 instructions.

:func:`~quantemu.intmath.matmul.matmul_exact` proves float BLAS exact; this engine is its faster
sibling for 8-bit operands. onnxruntime's ``MatMulInteger`` (MLAS: VNNI ``vpdpbusd``, AMX)
multiplies a u8 matrix by an s8 matrix into s32, several times faster than a float32 GEMM of
the same shape on this kind of CPU. The engine is optional: onnxruntime is not a core
dependency (install ``quantemu[int8]``), and without it, or where its self-check fails, the
float path stays the default (:data:`GemmEngine.NUMPY`).

Exactness. The weights ``b`` (``K x N``, frozen at lowering) must hold s8 values; the
activations ``a`` are moved into u8 by a zero point ``z`` (``a + z`` in ``[0, 255]``, the engine
subtracts ``z`` back: ``(a + z - z) @ b``). With ``C = max_n sum_k |b[k, n]|`` every product
sum, every zero-point correction ``z * sum_k b[k, n]`` (``z <= 255``) and the result are at
most ``255 * C`` in magnitude; the plan admits ``b`` only when ``255 * C <= 2**31 - 1``, so the
s32 accumulator never wraps whatever order the kernel adds in. What no bound can rule out is a
kernel that saturates (x86 without VNNI sums u8 x s8 pairs with ``vpmaddubsw``, which
saturates at int16): the one-time self-check feeds exactly those pairs and rejects the engine
when any sum differs from the int64 one.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

import numpy as np

from quantemu.intmath import parallel

__all__ = ["GemmEngine", "Int8Plan", "default_engine", "engine_works", "int8_plan", "run"]

INT32_MAX = 2**31 - 1
U8_MAX = 255
MIN_MACS = 1 << 16  # below this, one session call costs more than the float GEMM it replaces


class GemmEngine(enum.Enum):
    """Who computes an exact integer GEMM.

    ``NUMPY``: float32/float64 BLAS where :func:`matmul_exact`'s bound proves it exact, else
    int64 or Python ints; always available. ``ORT``: onnxruntime's ``MatMulInteger`` (u8 x s8
    into s32) where the int8 plan's bound proves the s32 accumulator exact, else ``NUMPY``.
    """

    NUMPY = "numpy"
    ORT = "onnxruntime"


@dataclass(frozen=True, eq=False)
class Int8Plan:
    """The engine's state for one weight matrix: its s8 copy, proved bound, and sessions."""

    k: int
    n: int
    bound: int  # 255 * max_n sum_k |b[k, n]|: every value the s32 accumulator holds
    model: bytes  # the MatMulInteger model holding the s8 weights
    sessions: dict  # intra-op thread count -> session, built on first use

    def session(self):
        """The session for :func:`quantemu.intmath.parallel.threads` threads."""
        threads = parallel.threads()
        if threads not in self.sessions:
            self.sessions[threads] = _session(self.model, threads)
        return self.sessions[threads]


@functools.cache
def engine_works(engine: GemmEngine) -> bool:
    """Whether ``engine`` is installed and passes the self-check (run once per process)."""
    if engine is GemmEngine.NUMPY:
        return True
    try:
        import onnxruntime  # noqa: F401, PLC0415 (optional: the int8 extra)
    except ImportError:
        return False
    return _self_check(engine)


@functools.cache
def default_engine() -> GemmEngine:
    """The fastest engine that works here: ``ORT`` when installed and self-checked, else
    ``NUMPY``. On ResNet-18's GEMM shapes (a 2-core AVX-512 VNNI CPU, issue 17) ``ORT`` took
    1.7-22x less time than the float path, the activations' conversion to u8 included."""
    return GemmEngine.ORT if engine_works(GemmEngine.ORT) else GemmEngine.NUMPY


def _self_check(engine: GemmEngine) -> bool:
    """Saturation probes: adjacent u8 255 x s8 -128 (or 127) pairs overflow int16 (-65280),
    then random extremes, at a GEMV shape and a blocked one, against int64 sums."""
    rng = np.random.default_rng(17)
    for m, k, n in ((1, 64, 16), (40, 600, 24)):
        b = rng.choice(np.array([-128, 127, -127, 0, 1], np.int8), size=(k, n))
        b[:, 0], b[:, 1] = -128, 127
        a = rng.choice(np.array([0, 255, 254, 1, 128], np.uint8), size=(m, k))
        a[0] = 255
        plan = _make_plan(b, engine)
        for zp in (0, 128, 255):
            want = (a.astype(np.int64) - zp) @ b.astype(np.int64)
            got = plan.session().run(None, {"a": a, "zp": np.array(zp, np.uint8)})[0]
            if got.dtype != np.int32 or not np.array_equal(got, want):
                return False
    return True


def _make_plan(b8: np.ndarray, engine: GemmEngine) -> Int8Plan:
    from onnx import TensorProto, helper  # noqa: PLC0415 (onnx is core; load it on first use)

    k, n = b8.shape
    inputs = [
        helper.make_tensor_value_info("a", TensorProto.UINT8, [None, k]),
        helper.make_tensor_value_info("zp", TensorProto.UINT8, []),
    ]
    output = helper.make_tensor_value_info("y", TensorProto.INT32, [None, n])
    weights = helper.make_tensor("w", TensorProto.INT8, [k, n], b8.tobytes(), raw=True)
    node = helper.make_node("MatMulInteger", ["a", "w", "zp"], ["y"])
    graph = helper.make_graph([node], "int8_gemm", inputs, [output], [weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    colmax = int(np.abs(b8.astype(np.int32)).sum(axis=0).max()) if b8.size else 0
    return Int8Plan(k=k, n=n, bound=U8_MAX * colmax, model=model.SerializeToString(), sessions={})


def _session(model: bytes, threads: int):
    import onnxruntime as ort  # noqa: PLC0415 (optional: the int8 extra)

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    # No spinning after a call: the next layer's NumPy/BLAS work needs the cores.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def int8_plan(b: np.ndarray, engine: GemmEngine) -> Int8Plan | None:
    """The plan for a weight matrix ``b``, or None when the engine cannot be exact for it:
    ``b`` not 2-D, not all s8 values, or ``255 * max_n sum_k |b[k, n]| > 2**31 - 1``.

    Called once per frozen ``b`` (``matmul_exact`` caches the answer)."""
    if engine is GemmEngine.NUMPY or b.ndim != 2 or b.size == 0 or not engine_works(engine):
        return None
    if b.dtype == np.int8:
        b8 = np.ascontiguousarray(b)
    else:
        if b.dtype.kind not in "iuf" or b.min() < -128 or b.max() > 127:
            return None
        b8 = np.ascontiguousarray(b, dtype=np.int8)
        if b.dtype.kind == "f" and not np.array_equal(b8, b):
            return None  # floats must hold integers
    plan = _make_plan(b8, engine)
    return plan if plan.bound <= INT32_MAX else None


def zero_point(a: np.ndarray, a_max: int | None) -> int | None:
    """A ``z`` in ``[0, 255]`` with ``a + z`` in ``[0, 255]`` everywhere, or None.

    8-bit dtypes and ``a_max <= 127`` need no scan; otherwise one min/max scan decides (the
    offset codes of TFLite, ``x - z`` with int8 ``x``, span 256 values around zero)."""
    if a.dtype == np.uint8:
        return 0
    if a.dtype == np.int8 or (a_max is not None and a_max <= 127):
        return 128
    lo, hi = int(a.min()), int(a.max())
    z = max(0, -lo)
    return z if z <= U8_MAX and hi + z <= U8_MAX else None


def run(plan: Int8Plan, a: np.ndarray, z: int) -> np.ndarray:
    """``a @ b`` as int64, shape ``(*a.shape[:-1], N)``; ``z`` from :func:`zero_point`."""
    if a.dtype == np.int8:
        u = np.bitwise_xor(a.view(np.uint8), 0x80)  # a + 128, without leaving u8
    elif a.dtype == np.uint8 and z == 0:
        u = a
    else:
        u = np.empty(a.shape, np.uint8)
        np.add(a, z, out=u, casting="unsafe")  # in [0, 255] by zero_point's proof
    u2 = np.ascontiguousarray(u.reshape(-1, plan.k))
    y = plan.session().run(None, {"a": u2, "zp": np.array(z, np.uint8)})[0]
    return y.astype(np.int64).reshape(*a.shape[:-1], plan.n)
