"""Conv and ConvTranspose (2-D, NCHW): shapes and float32 kernels.

Normalized attributes: ``kernel_shape=(kh, kw)``, ``strides=(sh, sw)``, ``dilations=(dh, dw)``,
``pads=(top, left, bottom, right)`` (auto_pad is resolved by the importer), ``group``; and for
ConvTranspose also ``output_padding=(oh, ow)``.

The convolution is im2col + one BLAS matmul: the strided, dilated windows of the padded input are
copied once, one strided slice per kernel tap (:func:`~quantemu.intmath.window_columns`), as
``(N, groups, C/g*kh*kw, OH*OW)`` and multiplied by the weights ``(groups, M/g, C/g*kh*kw)`` in
a single (batched) ``np.matmul``, whose result is already NCHW. There is no Python loop over
pixels, channels or groups (only over the kernel's taps).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantemu.graph.ir import UNKNOWN_DIM, Attrs, Dim, Node, Shape, TensorInfo
from quantemu.graph.ops._spec import data, fail, known, register, same_dim
from quantemu.graph.ops.activation import apply_activation
from quantemu.intmath.windows import window_columns


def conv_out_dim(size: Dim, kernel: int, stride: int, dilation: int, pad: int, *, ceil=False):
    """Output length of a window sweep: ``floor_or_ceil((size + pad - d*(k-1) - 1)/s) + 1``."""
    if not known(size):
        return UNKNOWN_DIM
    span = size + pad - dilation * (kernel - 1) - 1
    if ceil:
        return -(-span // stride) + 1
    return span // stride + 1


def _check_bias(node: Node, infos: Sequence[TensorInfo | None], channels: Dim) -> None:
    bias = infos[2] if len(infos) > 2 else None
    if bias is not None and (bias.rank != 1 or not _fits(bias.shape[0], channels)):
        raise fail(node, f"bias {bias.name!r} has shape {bias.shape}, expected ({channels},)")


def _fits(a: Dim, b: Dim) -> bool:
    return not (known(a) and known(b)) or a == b


def _spatial(node: Node, x: TensorInfo, transpose: bool) -> tuple[Dim, Dim]:
    a = node.attrs
    kh, kw = a["kernel_shape"]
    sh, sw = a["strides"]
    dh, dw = a["dilations"]
    pt, pl, pb, pr = a["pads"]
    if transpose:
        oph, opw = a["output_padding"]
        h, w = x.shape[2], x.shape[3]
        oh = sh * (h - 1) + oph + dh * (kh - 1) + 1 - pt - pb if known(h) else UNKNOWN_DIM
        ow = sw * (w - 1) + opw + dw * (kw - 1) + 1 - pl - pr if known(w) else UNKNOWN_DIM
    else:
        oh = conv_out_dim(x.shape[2], kh, sh, dh, pt + pb)
        ow = conv_out_dim(x.shape[3], kw, sw, dw, pl + pr)
    if (known(oh) and oh < 1) or (known(ow) and ow < 1):
        raise fail(
            node,
            f"input {x.shape[2]}x{x.shape[3]} with kernel {kh}x{kw}, strides {sh}x{sw}, "
            f"dilations {dh}x{dw} and pads {a['pads']} gives an empty output {oh}x{ow}",
        )
    return oh, ow


def _operands(node: Node, infos: Sequence[TensorInfo | None]) -> tuple[TensorInfo, TensorInfo]:
    """X and W, both 4-D, with W's spatial shape equal to ``kernel_shape``."""
    x, w = data(node, infos, 0, 4), data(node, infos, 1, 4)
    if tuple(w.shape[2:]) != tuple(node.attrs["kernel_shape"]):
        raise fail(node, f"weight {w.name!r} shape {w.shape} does not match kernel_shape")
    return x, w


def _check_group(node: Node, channels: Dim, which: str) -> None:
    group = node.attrs["group"]
    if known(channels) and channels % group:
        raise fail(node, f"{channels} {which} channels are not divisible by group={group}")


def infer_conv(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    """``(N, C, H, W) * (M, C/group, kh, kw) -> (N, M, OH, OW)``."""
    x, w = _operands(node, infos)
    group = node.attrs["group"]
    m, cg = w.shape[:2]
    _check_group(node, m, "output")
    same_dim(
        node,
        x.shape[1],
        cg * group if known(cg) else UNKNOWN_DIM,
        f"input channels vs weight {w.name!r} {w.shape} x group {group}",
    )
    _check_bias(node, infos, m)
    return [(x.shape[0], m, *_spatial(node, x, transpose=False))]


def infer_conv_transpose(node: Node, infos: Sequence[TensorInfo | None]) -> list[Shape]:
    """``(N, C, H, W) * (C, M/group, kh, kw) -> (N, M, OH, OW)``."""
    x, w = _operands(node, infos)
    c, mg = w.shape[:2]
    same_dim(node, x.shape[1], c, f"input channels vs weight {w.name!r} {w.shape}")
    _check_group(node, c, "input")
    m = mg * node.attrs["group"] if known(mg) else UNKNOWN_DIM
    _check_bias(node, infos, m)
    return [(x.shape[0], m, *_spatial(node, x, transpose=True))]


def conv_macs(node: Node, infos: Sequence[TensorInfo | None], outs: Sequence[TensorInfo]) -> int:
    """Multiply-accumulates per sample: output elements x (C/group * kh * kw)."""
    w, out = infos[1], outs[0]
    if w is None or not all(known(d) for d in (*w.shape, *out.shape[1:])):
        return 0
    per_output = int(np.prod(w.shape[1:]))
    if node.op_type == "ConvTranspose":  # each input element meets M/g * kh * kw weights
        x = infos[0]
        if x is None or not all(known(d) for d in x.shape[1:]):
            return 0
        return int(np.prod(x.shape[1:])) * per_output
    return int(np.prod(out.shape[1:])) * per_output


def pad_or_crop(x: np.ndarray, pads: Sequence[int], value: float = 0.0) -> np.ndarray:
    """Pad (positive) or crop (negative) the last two axes by ``(top, left, bottom, right)``."""
    pt, pl, pb, pr = pads
    if min(pads) < 0:
        h, w = x.shape[-2:]
        x = x[..., max(-pt, 0) : h - max(-pb, 0), max(-pl, 0) : w - max(-pr, 0)]
        pt, pl, pb, pr = (max(p, 0) for p in pads)
    if pt or pl or pb or pr:
        widths = [(0, 0)] * (x.ndim - 2) + [(pt, pb), (pl, pr)]
        x = np.pad(x, widths, constant_values=value)
    return x


def conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, attrs: Attrs) -> np.ndarray:
    """Grouped 2-D convolution (cross-correlation) in float32, as ONNX Conv."""
    n = x.shape[0]
    m, cg, kh, kw = w.shape
    g = attrs["group"]
    if (kh, kw) == (1, 1) and min(attrs["pads"]) == 0:
        # a 1x1 kernel needs no window copy: the columns are a strided view of x itself
        sh, sw = attrs["strides"]
        x = x[:, :, ::sh, ::sw]
        oh, ow = x.shape[2:]
        cols = x.reshape(n, g, cg, oh * ow)
    else:
        # (N, C, kh, kw, OH, OW), one strided copy per tap: K-major columns, so the matmul
        # result (M/g, OH*OW) per group is already NCHW.
        full = window_columns(
            x, (kh, kw), strides=attrs["strides"], dilations=attrs["dilations"],
            pads=attrs["pads"],
        )  # fmt: skip
        oh, ow = full.shape[-2:]
        cols = full.reshape(n, g, cg * kh * kw, oh * ow)
    weights = w.reshape(g, m // g, cg * kh * kw)
    out = (weights[0] @ cols[:, 0]) if g == 1 else np.matmul(weights, cols)
    out = out.reshape(n, m, oh, ow)
    if b is not None:
        out += b.reshape(1, m, 1, 1)
    return out


def conv_transpose2d(x, w, b, attrs: Attrs) -> np.ndarray:
    """ONNX ConvTranspose as a stride-1 Conv over the zero-stuffed input with flipped weights."""
    n, c, h, wd = x.shape
    _, mg, kh, kw = w.shape
    g = attrs["group"]
    (sh, sw), (dh, dw) = attrs["strides"], attrs["dilations"]
    stuffed = np.zeros((n, c, (h - 1) * sh + 1, (wd - 1) * sw + 1), dtype=np.float32)
    stuffed[:, :, ::sh, ::sw] = x
    pt, pl, pb, pr = attrs["pads"]
    oph, opw = attrs["output_padding"]
    ext_h, ext_w = dh * (kh - 1), dw * (kw - 1)
    pads = (ext_h - pt, ext_w - pl, ext_h - pb + oph, ext_w - pr + opw)
    # (C, M/g, kh, kw) -> (M, C/g, kh, kw), flipped in space.
    flipped = w.reshape(g, c // g, mg, kh, kw).transpose(0, 2, 1, 3, 4)[..., ::-1, ::-1]
    flipped = np.ascontiguousarray(flipped.reshape(g * mg, c // g, kh, kw))
    inner = Attrs({"group": g, "pads": pads, "strides": (1, 1), "dilations": (dh, dw)})
    return conv2d(stuffed, flipped, b, inner)


def run_conv(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """Conv kernel (with a fused activation, if any)."""
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    return [apply_activation(conv2d(x, w, b, attrs), attrs)]


def run_conv_transpose(attrs: Attrs, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """ConvTranspose kernel (with a fused activation, if any)."""
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    return [apply_activation(conv_transpose2d(x, w, b, attrs), attrs)]


register("Conv", infer_conv, run_conv, inputs=(2, 3), macs=conv_macs)
register("ConvTranspose", infer_conv_transpose, run_conv_transpose, inputs=(2, 3), macs=conv_macs)
