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

Layout. s8 activations are not fed as s8 rows: MLAS has no VNNI kernel for s8 x s8 and took
about 19x longer than u8 x s8 on ResNet-18's shapes (onnxruntime 1.32). Rows cost one pass into
u8; columns laid out ``K x M`` (a transposed view) are read in place as the s8 right operand of
``b.T @ a.T``, the weights shifted to u8 once (:func:`_transposed_model`).
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
    sessions: dict  # intra-op thread count (and "t" for the transposed model) -> session
    weights: np.ndarray | None = None  # the s8 weights, for the transposed model

    def session(self, transposed: bool = False):
        """The session for :func:`quantemu.intmath.parallel.threads` threads: ``a @ b``, or
        with ``transposed`` ``b.T @ a.T`` (see :func:`_transposed_model`)."""
        key = (parallel.threads(), "t") if transposed else parallel.threads()
        if key not in self.sessions:
            model = _transposed_model(self.weights) if transposed else self.model
            self.sessions[key] = _session(model, parallel.threads())
        return self.sessions[key]


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
            # the same product transposed: s8 columns a - 128 with the zero point zp - 128
            c = np.bitwise_xor(a.T, 0x80).view(np.int8)[None]
            cz = np.array(zp - 128, np.int8)
            got = plan.session(transposed=True).run(None, {"c": c, "cz": cz})[0]
            if got.dtype != np.int32 or not np.array_equal(got[0].T, want):
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
    bound = U8_MAX * colmax
    return Int8Plan(k=k, n=n, bound=bound, model=model.SerializeToString(), sessions={}, weights=b8)


def _transposed_model(b8: np.ndarray) -> bytes:
    """``y[g] = (b.T + 128 - 128) @ (c[g] - cz)``: the weights as the u8 left operand, the
    activations' columns ``c`` (``G x K x M``, s8) as the right one, so that columns laid out
    ``K x M`` (NVDLA's im2col) are read in place instead of gathered into rows.

    Exact where the plan is (the same s32 terms: ``|(b + 128) c| <= 255 * 128 * K`` and
    ``|128 * sum_k c| <= 128 * 128 * K``, checked by :func:`transposed_fits`); the self-check
    runs this model too.
    """
    from onnx import TensorProto, helper  # noqa: PLC0415

    k, n = b8.shape
    wt = np.bitwise_xor(np.ascontiguousarray(b8.T).view(np.uint8), 0x80)  # b.T + 128
    inputs = [
        helper.make_tensor_value_info("c", TensorProto.INT8, [None, k, None]),
        helper.make_tensor_value_info("cz", TensorProto.INT8, []),
    ]
    output = helper.make_tensor_value_info("y", TensorProto.INT32, [None, n, None])
    inits = [
        helper.make_tensor("w", TensorProto.UINT8, [n, k], wt.tobytes(), raw=True),
        helper.make_tensor("wz", TensorProto.UINT8, [], bytes([128]), raw=True),
    ]
    node = helper.make_node("MatMulInteger", ["w", "c", "wz", "cz"], ["y"])
    graph = helper.make_graph([node], "int8_gemm_t", inputs, [output], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def transposed_fits(plan: Int8Plan) -> bool:
    """Whether every s32 term of the transposed product is in int32: ``255 * 128 * K``."""
    return U8_MAX * 128 * plan.k <= INT32_MAX


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


_ZP = tuple(np.array(z, np.uint8) for z in range(U8_MAX + 1))  # the zp inputs, made once
_CZ = tuple(np.array(z - 128, np.int8) for z in range(U8_MAX + 1))  # the transposed form's
for _z in (*_ZP, *_CZ):
    _z.setflags(write=False)


def run(plan: Int8Plan, a: np.ndarray, z: int, *, dtype=np.int64) -> np.ndarray:
    """``a @ b``, shape ``(*a.shape[:-1], N)``; ``z`` from :func:`zero_point`.

    ``dtype``: ``np.int64`` (a cast of the s32 result, one pass), or ``np.int32`` for callers
    that take the kernel's own result without that pass (exact: ``|a @ b| <= bound``). An ``a``
    whose columns are contiguous (a transposed view) is read in place as the right operand of
    ``b.T @ a.T``, and the result is then a transposed view.
    """
    if a.ndim >= 2 and not a.flags.c_contiguous and transposed_fits(plan):
        at = a.swapaxes(-1, -2)
        if at.flags.c_contiguous:
            return _run_transposed(plan, at, z, dtype)
    if a.dtype == np.uint8 and z == 0:
        u = np.ascontiguousarray(a)
    else:  # one pass into C order, whatever a's strides, so the reshape below is a view
        u = np.empty(a.shape, np.uint8)
        if a.dtype == np.int8:
            np.bitwise_xor(a.view(np.uint8), 0x80, out=u)  # a + 128, without leaving u8
        else:
            np.add(a, z, out=u, casting="unsafe")  # in [0, 255] by zero_point's proof
    u = u.reshape(-1, plan.k)
    # The kernel subtracts z itself: MLAS folds z * sum_k b[k, n] from its packed weights.
    y = plan.session().run(None, {"a": u, "zp": _ZP[z]})[0]
    if dtype != np.int32:
        y = y.astype(np.int64)
    return y.reshape(*a.shape[:-1], plan.n)


def _run_transposed(plan: Int8Plan, at: np.ndarray, z: int, dtype) -> np.ndarray:
    """``(b.T @ at).T`` for C-contiguous columns ``at`` (``... x K x M``): s8 values
    ``a + z - 128`` (in ``[-128, 127]`` by :func:`zero_point`) with the zero point ``z - 128``."""
    if at.dtype == np.int8 and z == 128:  # the codes themselves, no copy
        c = at
    elif at.dtype == np.uint8 and z == 0:  # a - 128, without leaving 8 bits
        c = np.bitwise_xor(at, 0x80).view(np.int8)
    else:
        c = np.empty(at.shape, np.int8)
        np.add(at, z - 128, out=c, casting="unsafe")
    feeds = {"c": c.reshape(-1, *at.shape[-2:]), "cz": _CZ[z]}
    y = plan.session(transposed=True).run(None, feeds)[0]
    if dtype != np.int32:
        y = y.astype(np.int64)
    return y.reshape(*at.shape[:-2], plan.n, at.shape[-1]).swapaxes(-1, -2)
