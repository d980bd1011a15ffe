"""Softmax as xcore-opt 1.4.2 builds it: ``XC_softmax`` / ``XC_batched_softmax``, or TFLite's.

``XCPatterns.td`` replaces an int8 SOFTMAX whose ``beta`` is 1 by ``XC_softmax`` when its
input is ``(1, C)`` and by ``XC_batched_softmax`` when it is ``(1, T, C)`` with ``T != 1``; a
``(1, H, W, C)`` input is reshaped to ``(1, H * W, C)`` first, so it is batched too unless
``H * W == 1``. Ranks 1 and 5, ``(1, 1, C)`` and ``(1, 1, 1, C)`` keep TFLite's SOFTMAX
(TFLite-Micro's kernel), as does any other type. Both XC ops compute each row the same way
with one thread (:mod:`quantemu.backends.xs3.xformer.softmax`), so one layer serves both, in
the int8 path (the table derived from the input quantization) and in a compiled model (the
table read from the file: :func:`decode_xc_softmax`, registered in :mod:`.compiled`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from quantemu.backends.tflite.lower import rules as tflite_rules
from quantemu.backends.tflite.lower.context import TfliteContext
from quantemu.backends.xs3.xformer.lower.compiled_layers import NOTE
from quantemu.backends.xs3.xformer.softmax import softmax_exp_table, xc_softmax
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Node
from quantemu.graph.tflite_import import NCHW_KEY
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor

NOTE_KEPT = "xcore-opt keeps this SOFTMAX ({why}): TFLite-Micro's reference kernel"
_NHWC_OF_NCHW = (0, 3, 1, 2)  # where each NCHW axis sits in the file's NHWC tensor


@dataclass(frozen=True, eq=False, kw_only=True)
class XcSoftmaxLayer(Layer):
    """``XC_softmax`` / ``XC_batched_softmax`` over ``axis`` with the float32 exp ``table``."""

    table: np.ndarray  # float32 (256,): entry i is exp of the code i - 128
    axis: int
    encoding: LinearEncoding

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Every row along ``axis`` through lib_nn's float kernel (rows are independent)."""
        x = np.moveaxis(inputs[0].codes, self.axis, -1)
        y, counters = xc_softmax(x, self.table)
        y = np.ascontiguousarray(np.moveaxis(y, -1, self.axis), np.int8)
        return LayerOutput(QTensor(y, self.encoding), counters)


def _file_axis(ctx: TfliteContext, name: str, axis: int) -> int:
    """``axis`` of IR tensor ``name`` as the TFLite file numbers it (NCHW held: NHWC)."""
    rank = len(ctx.shape(name))
    held = set(ctx.graph.metadata.get(NCHW_KEY, "").split("\n"))
    axis %= rank
    return _NHWC_OF_NCHW[axis] if rank == 4 and name in held else axis


def _kept_because(ctx: TfliteContext, node: Node) -> str:
    """Why xcore-opt keeps this Softmax as TFLite's ("" when it becomes an XC op)."""
    x = node.inputs[0]
    e_in = ctx.encoding(x)
    if e_in.dtype != "int8" or e_in.axis is not None or np.size(e_in.scale) != 1:
        return f"input {e_in.dtype}, not int8 per tensor"
    if ctx.output_encoding(node).dtype != "int8":
        return "output not int8"
    if float(node.attrs.get("beta", 1.0)) != 1.0:
        return f"beta {node.attrs['beta']} != 1"
    shape = ctx.shape(x)
    axis = int(node.attrs["axis"]) % len(shape)
    if _file_axis(ctx, x, axis) != len(shape) - 1:
        return f"axis {axis} is not the last axis of the TFLite tensor"
    rows = int(np.prod([d for i, d in enumerate(shape) if i not in (0, axis)], dtype=np.int64))
    if len(shape) == 2 or (len(shape) in (3, 4) and rows != 1):
        return ""
    return f"rank {len(shape)} input, {rows} rows per sample"


def lower_xc_softmax(ctx: TfliteContext, node: Node) -> Layer:
    """Softmax: ``XC_softmax`` / ``XC_batched_softmax`` (module docstring), else TFLite's."""
    base = tflite_rules.lower_softmax(ctx, node)  # its checks and output encoding
    why = _kept_because(ctx, node)
    if why:
        return dataclasses.replace(base, note=NOTE_KEPT.format(why=why))
    e_in = ctx.encoding(node.inputs[0])
    rank = len(ctx.shape(node.inputs[0]))
    return ctx.layer(
        XcSoftmaxLayer,
        node,
        op="XC_softmax" if rank == 2 else "XC_batched_softmax",
        table=softmax_exp_table(float(e_in.scale), int(e_in.zero_point)),
        axis=base.axis,
        encoding=base.encoding,
    )


def decode_xc_softmax(ctx, node: Node, opts: dict) -> Layer:
    """A compiled ``XC_softmax`` / ``XC_batched_softmax``: the exp table stored in the file
    (input 1, float32) over the last axis of the NHWC codes."""
    code = node.attrs["custom_code"]
    name = node.inputs[1] if len(node.inputs) > 1 else ""
    table = ctx.graph.initializers.get(name) if name else None
    if table is None or table.dtype != np.float32 or table.size != 256:
        found = "absent" if table is None else f"{table.dtype} {table.shape}"
        raise InvalidInputError(
            f"{node}: input 1 ({name or 'absent'}) of {code} should be the 256-entry float32 "
            f"exp table stored in the file, found {found}"
        )
    if opts:
        raise UnsupportedError(f"{node}: {code} with options {sorted(opts)} (1.4.2 writes none)")
    return ctx.layer(
        XcSoftmaxLayer,
        node,
        op=code,
        note=NOTE,
        inputs=(node.inputs[0],),
        table=np.array(table, np.float32).reshape(256),  # a copy: the graph's stays writable
        axis=-1,
        encoding=ctx.encoding(node.outputs[0]),
    )


__all__ = ["XcSoftmaxLayer", "decode_xc_softmax", "lower_xc_softmax"]
