"""Gemm and MatMul: shapes and float32 kernels (one BLAS matmul each).

Gemm's normalized attributes are ``alpha``, ``beta`` (floats), ``transA``, ``transB`` (0 or 1);
both ops may carry a fused activation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantemu.graph.ir import Attrs, Node, Shape, TensorInfo
from quantemu.graph.ops._spec import broadcast, data, fail, known, register, same_dim
from quantemu.graph.ops.activation import apply_activation


def _infer_gemm(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    a, b = data(node, infos, 0, 2), data(node, infos, 1, 2)
    m, k = a.shape[::-1] if node.attrs["transA"] else a.shape
    kb, n = b.shape[::-1] if node.attrs["transB"] else b.shape
    same_dim(
        node,
        k,
        kb,
        f"inner dimensions of A {a.shape} and B {b.shape} (transA="
        f"{node.attrs['transA']}, transB={node.attrs['transB']})",
    )
    c = infos[2] if len(infos) > 2 else None
    if c is not None and broadcast(node, [(m, n), c.shape]) != (m, n):
        raise fail(node, f"C {c.name!r} {c.shape} does not broadcast to the output ({m}, {n})")
    return [(m, n)]


def _run_gemm(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    a, b = inputs[0], inputs[1]
    a = a.T if attrs["transA"] else a
    b = b.T if attrs["transB"] else b
    y = a @ b
    if attrs["alpha"] != 1.0:
        y *= np.float32(attrs["alpha"])
    c = inputs[2] if len(inputs) > 2 else None
    if c is not None:
        y += c if attrs["beta"] == 1.0 else c * np.float32(attrs["beta"])
    return [apply_activation(y, attrs)]


def _gemm_macs(node: Node, infos, outs) -> int:
    a = infos[0]
    k = a.shape[0] if node.attrs["transA"] else a.shape[1]
    n = outs[0].shape[1]
    return k * n if known(k) and known(n) else 0


def _infer_matmul(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    a, b = data(node, infos, 0), data(node, infos, 1)
    if a.rank == 0 or b.rank == 0:
        raise fail(node, "MatMul inputs must have rank >= 1")
    a_shape = (1, *a.shape) if a.rank == 1 else a.shape
    b_shape = (*b.shape, 1) if b.rank == 1 else b.shape
    same_dim(node, a_shape[-1], b_shape[-2], f"inner dimensions of {a.shape} and {b.shape}")
    batch = broadcast(node, [a_shape[:-2], b_shape[:-2]])
    out = (*batch, a_shape[-2], b_shape[-1])
    if a.rank == 1:
        out = out[:-2] + out[-1:]
    if b.rank == 1:
        out = out[:-1]
    return [out]


def _run_matmul(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    y = np.asarray(np.matmul(inputs[0], inputs[1]), dtype=np.float32)
    return [apply_activation(y, attrs)]


def _matmul_macs(node: Node, infos, outs) -> int:
    k = infos[0].shape[-1]
    rest = outs[0].shape[1:]
    if not known(k) or not all(known(d) for d in rest):
        return 0
    return int(k * np.prod(rest, dtype=np.int64))


register("Gemm", _infer_gemm, _run_gemm, inputs=(2, 3), macs=_gemm_macs)
register("MatMul", _infer_matmul, _run_matmul, inputs=2, macs=_matmul_macs)
