"""Operators tflite2xcore leaves to TFLite-Micro's int8 reference kernels: ADD/SUB, and
AVERAGE_POOL_2D where it does not substitute lib_nn's ``avgpool2d``.

tflite2xcore keeps them as builtin operators, so an xcore.ai deployment runs TFLite-Micro's
``reference_integer_ops::Add`` (gemmlowp arithmetic; SUB its subtracting twin) and
``reference_integer_ops::AveragePool``. Both are the ``tflite`` backend's kernels and rules
(:func:`~quantemu.backends.tflite.lower.rules.lower_binary`,
:func:`~quantemu.backends.tflite.lower.rules.lower_pool`, run as TFLite-Micro through
:attr:`Options.kernel_runtime <quantemu.backends.xs3.lower.options.Options.kernel_runtime>`);
here their layers are only named as this path names them (``tflite:ADD``, ...), ``exact=False``
with a note: they are not lib_nn operators and no xs3 conformance vector covers them.

The one form the ``tflite`` rules refuse is an average pool that counts its padding
(``count_include_pad`` with pads): a converter writes it as an explicit PAD with the zero point
before a VALID pool, which :class:`PaddedAveragePoolLayer` runs (TFLite's PAD, then TFLite's
AVERAGE_POOL_2D, which never counts a ``ceil_mode`` overhang).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from quantemu.backends.tflite.lower import rules as tflite_rules
from quantemu.backends.tflite.lower.layers import PoolLayer
from quantemu.backends.tflite.requant import pad
from quantemu.backends.xs3.lower.context import Xs3Context
from quantemu.errors import UnsupportedError
from quantemu.graph.ir import Node
from quantemu.program import Layer, LayerOutput, QTensor

TFLM_NOTE = (
    "TFLite-Micro reference kernel {op}, not a lib_nn operator; not covered by conformance vectors"
)


def _as_tflm(layer: Layer) -> Layer:
    """A ``tflite`` layer as this path names it: ``tflite:OP``, ``exact=False``, the note."""
    note = TFLM_NOTE.format(op=layer.op)
    return dataclasses.replace(layer, op=f"tflite:{layer.op}", exact=False, note=note)


def lower_add(ctx: Xs3Context, node: Node) -> Layer:
    """Add / Sub: TFLite-Micro's ADD / SUB, fused activation applied (module docstring)."""
    return _as_tflm(tflite_rules.lower_binary(ctx, node))


@dataclass(frozen=True, eq=False, kw_only=True)
class PaddedAveragePoolLayer(PoolLayer):
    """TFLite's PAD with the zero point (``frame``: top, left, bottom, right), then its
    AVERAGE_POOL_2D (``pads``: only a ``ceil_mode`` overhang, never counted)."""

    frame: tuple[int, int, int, int]

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """The padded image, then the pool (module docstring)."""
        x = inputs[0]
        top, left, bottom, right = self.frame
        widths = ((0, 0), (0, 0), (top, bottom), (left, right))
        framed = QTensor(pad(x.codes, widths, int(x.encoding.zero_point)), x.encoding)
        return super().compute([framed])


def _padded_pool(ctx: Xs3Context, node: Node) -> Layer:
    """An AveragePool that counts its ``pads``: TFLite's pool (the ``tflite`` rule) over the
    image framed by them, which reaches past the frame only by a ``ceil_mode`` overhang."""
    a = node.attrs
    top, left, bottom, right = (int(p) for p in a["pads"])
    (kh, kw), (sh, sw) = a["kernel_shape"], a["strides"]
    _, _, h, w = ctx.shape(node.inputs[0])
    _, _, oh, ow = ctx.shape(node.outputs[0])
    over_h = max((oh - 1) * sh + kh - (h + top + bottom), 0)
    over_w = max((ow - 1) * sw + kw - (w + left + right), 0)
    framed = node.with_attrs(pads=(0, 0, over_h, over_w), ceil_mode=0, count_include_pad=0)
    pool = tflite_rules.lower_pool(ctx, framed)
    fields = {f.name: getattr(pool, f.name) for f in dataclasses.fields(pool)}
    return _as_tflm(PaddedAveragePoolLayer(**fields, frame=(top, left, bottom, right)))


def lower_tflite_avgpool(ctx: Xs3Context, node: Node) -> Layer:
    """AveragePool on TFLite-Micro's AVERAGE_POOL_2D (padding, C % 4 != 0, ceil_mode)."""
    if tuple(node.attrs["dilations"]) != (1, 1):
        raise UnsupportedError(f"{node}: dilated average pooling has no TFLite int8 kernel")
    if node.attrs["count_include_pad"]:
        if any(node.attrs["pads"]):
            return _padded_pool(ctx, node)
        # no explicit pads: nothing to count (a ceil_mode overhang never is)
        node = node.with_attrs(count_include_pad=0)
    return _as_tflm(tflite_rules.lower_pool(ctx, node))
