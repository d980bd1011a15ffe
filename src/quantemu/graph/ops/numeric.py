"""LayerNormalization, Erf, Gelu, Sqrt, Pow, Reciprocal, Rsqrt, SquaredDifference, Min, Max.

Normalized attributes: LayerNormalization ``axis`` (non-negative; normalized over
``axis..rank-1``), ``epsilon``, ``stash_type`` (1 or 11), inputs ``X, Scale[, B]``, outputs
``Y`` and, only where the model reads them, ``Mean`` and ``InvStdDev`` (of shape
``X.shape[:axis]`` then ones); Gelu ``approximate`` (``"none"`` or ``"tanh"``); Pow: inputs
``X, Y`` (the exponent, usually a constant initializer; broadcast); Erf, Sqrt, Reciprocal: none.
Rsqrt (``1/sqrt(x)``) and SquaredDifference (``(a-b)**2``, broadcast) are not ONNX ops: they
are TFLite's RSQRT and SQUARED_DIFFERENCE (a LayerNormalization as TensorFlow converts it).
Min and Max take exactly two inputs here (broadcast); ONNX's variadic forms are refused.

LayerNormalization, Erf and Gelu compute in float64 and round once to float32: the result is the
correctly rounded value (or within an ulp of it), which is what onnxruntime's float32 kernels
approximate. NumPy has no erf; ``math.erf`` (C's libm, double) mapped over the elements costs about
0.15 us per element, as fast as a vectorized series and exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from quantemu.graph.ir import Attrs, Node, Shape, TensorInfo
from quantemu.graph.ops._spec import broadcast, data, fail, register

_ERF = np.frompyfunc(math.erf, 1, 1)


def erf64(x: np.ndarray) -> np.ndarray:
    """``erf`` of every element, in float64."""
    return np.asarray(_ERF(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def _same_shape(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    return [data(node, infos, 0).shape]


def _infer_layer_norm(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    x = data(node, infos, 0)
    axis = node.attrs["axis"]
    if axis >= x.rank:
        raise fail(node, f"axis {axis} is out of range for input {x.shape}")
    normalized = tuple(x.shape[axis:])
    for index, role in ((1, "Scale"), (2, "B")):
        p = infos[index] if index < len(infos) else None
        if p is None:
            continue
        if p.rank > x.rank or broadcast(node, [x.shape, p.shape]) != tuple(x.shape):
            shown = f"{role} {p.name!r} {p.shape}"
            raise fail(node, f"{shown} does not broadcast to the normalized {normalized}")
    stats = tuple(x.shape[:axis]) + (1,) * (x.rank - axis)
    return [x.shape, stats, stats]


def _run_layer_norm(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x, scale = np.asarray(inputs[0], np.float64), inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    axes = tuple(range(attrs["axis"], x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    variance = np.mean(centered * centered, axis=axes, keepdims=True)
    # The model stores epsilon as a float32 attribute: use that value.
    inv_std = 1.0 / np.sqrt(variance + float(np.float32(attrs["epsilon"])))
    y = centered * inv_std * np.asarray(scale, np.float64)
    if bias is not None:
        y = y + np.asarray(bias, np.float64)
    return [y.astype(np.float32), mean.astype(np.float32), inv_std.astype(np.float32)]


def _run_erf(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    return [erf64(inputs[0]).astype(np.float32)]


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _run_gelu(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x = np.asarray(inputs[0], np.float64)
    if attrs["approximate"] == "tanh":
        gate = np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))
    else:
        gate = erf64(x / math.sqrt(2.0))
    return [(0.5 * x * (1.0 + gate)).astype(np.float32)]


def _run_sqrt(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    with np.errstate(invalid="ignore"):
        return [np.sqrt(inputs[0]).astype(np.float32, copy=False)]


def _run_reciprocal(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    with np.errstate(divide="ignore", over="ignore"):
        return [np.divide(np.float32(1), inputs[0], dtype=np.float32)]


def _infer_pow(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    return [broadcast(node, [data(node, infos, 0).shape, data(node, infos, 1).shape])]


def _run_pow(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    x, y = inputs[0], np.asarray(inputs[1])
    # powf, as onnxruntime's float32 kernel (an integer exponent is exact in float32 here).
    exponent = y.astype(np.float32) if y.dtype != np.float32 else y
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        return [np.power(x, exponent, dtype=np.float32)]


def _run_rsqrt(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    # 1/sqrt in float64, rounded once: the correctly rounded float32 (or within an ulp).
    with np.errstate(divide="ignore", invalid="ignore"):
        return [(1.0 / np.sqrt(np.asarray(inputs[0], np.float64))).astype(np.float32)]


def _run_squared_difference(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    with np.errstate(over="ignore", invalid="ignore"):
        d = np.subtract(inputs[0], inputs[1], dtype=np.float32)
        return [np.multiply(d, d, dtype=np.float32)]


def _run_min(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    return [np.minimum(inputs[0], inputs[1]).astype(np.float32, copy=False)]


def _run_max(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    return [np.maximum(inputs[0], inputs[1]).astype(np.float32, copy=False)]


register("LayerNormalization", _infer_layer_norm, _run_layer_norm, inputs=(2, 3))
register("Erf", _same_shape, _run_erf)
register("Gelu", _same_shape, _run_gelu)
register("Sqrt", _same_shape, _run_sqrt)
register("Reciprocal", _same_shape, _run_reciprocal)
register("Pow", _infer_pow, _run_pow, inputs=2)
register("Rsqrt", _same_shape, _run_rsqrt)
register("SquaredDifference", _infer_pow, _run_squared_difference, inputs=2)
register("Min", _infer_pow, _run_min, inputs=2)
register("Max", _infer_pow, _run_max, inputs=2)
