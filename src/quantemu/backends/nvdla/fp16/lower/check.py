"""Seed 001's FP16 error thresholds, applied to every FP16 layer against a local float reference.

NVDLA's verification compares each unit's fp16 output with a reference computed from the
**same inputs** (seed 001, "FP16 error threshold"): a layer's own error, not what earlier
layers passed on. quantemu does the same per layer: the reference is the float graph's kernel of
the node (:func:`~quantemu.graph.executor.run_node`, float32) on the layer's own fp16 inputs,
with the fp16 weights and operands the layer uses, rounded to fp16 (round to nearest even).
The check (:mod:`~quantemu.backends.nvdla.fp16.check`) then depends on the unit:

- convolution (CC DC): ``|a - b| <= 2^(max_exp - 20) * R*S*C * 2 + 2^(exp(a) - 10)``, with
  ``max_exp`` the window's largest ``(exp(d) & ~3) + (exp(w) & ~3)`` (:func:`conv_max_exp`);
- SDP: bit-for-bit identity;
- PDP and CDP: ``|a - b| <= 0.0001`` and ``|a - b| / max|window| <= 0.001``.

The counter ``fp16_check_violations`` is the number of output elements outside their threshold
(NaN in either counts as a violation, except identical NaN words in the SDP check). The float32
reference of a convolution rounds its sums (about 2^-24 relative); that is far inside every
threshold, which is at least one fp16 ulp.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from quantemu.backends.nvdla.fp16 import check as thresholds
from quantemu.graph.executor import run_node
from quantemu.graph.ir import Node
from quantemu.intmath import window_columns
from quantemu.program import QTensor

COUNTER = "fp16_check_violations"
_CHUNK = 1 << 22  # elements of one [N, K, C, P] block of the max-exponent search


def fp16_values(words: np.ndarray) -> np.ndarray:
    """fp16 words (``uint16``) as float16 values."""
    return np.asarray(words).astype(np.uint16, copy=False).view(np.float16)


@dataclass(frozen=True)
class Fp16Check:
    """The local reference of one layer: its node (fused activation included) and the fp16
    values of its constant inputs (weights, bias, operands) by input position; or, where the
    layer computes something other than the node's kernel in float, that ``kernel`` (called with
    the layer's dequantized inputs)."""

    node: Node
    constants: Mapping[int, np.ndarray] = field(default_factory=dict)
    kernel: Callable[..., np.ndarray] | None = None

    def reference(self, inputs: list[QTensor]) -> np.ndarray:
        """The node's float32 kernel on the layer's fp16 inputs, rounded to fp16."""
        if self.kernel is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                out = self.kernel(*(t.dequantize() for t in inputs))
                return np.asarray(out, dtype=np.float32).astype(np.float16)
        fed = iter(t.dequantize() for t in inputs)
        args = [
            self.constants[i] if i in self.constants else (next(fed) if name else None)
            for i, name in enumerate(self.node.inputs)
        ]
        out = run_node(self.node, args)[0]
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(out, dtype=np.float32).astype(np.float16)

    def sdp(self, y: np.ndarray, inputs: list[QTensor]) -> dict[str, int]:
        """The SDP check: output words identical to the reference's."""
        bad = thresholds.sdp_violations(fp16_values(y), self.reference(inputs))
        return {COUNTER: int(np.count_nonzero(bad))}

    def conv(self, y: np.ndarray, inputs: list[QTensor], max_exp, taps: int) -> dict[str, int]:
        """The CC DC check with the layer's ``max_exp`` and ``taps`` = R*S*C (per group)."""
        a, b = fp16_values(y), self.reference(inputs).reshape(y.shape)
        bad = thresholds.conv_violations(
            a, b, np.asarray(max_exp).reshape(y.shape), mode=thresholds.ConvMode.DC, taps=taps
        )
        return {COUNTER: int(np.count_nonzero(bad))}

    def window(self, y: np.ndarray, inputs: list[QTensor], window_max) -> dict[str, int]:
        """The PDP/CDP check; ``window_max`` is each output's largest window magnitude."""
        a, b = fp16_values(y), self.reference(inputs).reshape(y.shape)
        windows = np.asarray(window_max, dtype=np.float64).reshape(*y.shape, 1)
        bad = thresholds.pdp_violations(a, b, windows)
        return {COUNTER: int(np.count_nonzero(bad))}


def coarse_exponents(words: np.ndarray) -> np.ndarray:
    """``exp(v) & ~3`` of fp16 words (int8): the seed's 4-aligned unbiased exponent."""
    e = ((np.asarray(words).astype(np.int16) >> 10) & 0x1F) - 15
    return (e & ~3).astype(np.int8)


def conv_max_exp(x, w, *, group: int, strides, dilations, pads) -> np.ndarray:
    """``max_exp`` of every output of an NCHW convolution of fp16 words ``x`` with fp16 words
    ``w`` ``[M, C/g, R, S]``: the largest ``(exp(d) & ~3) + (exp(w) & ~3)`` over the window,
    padded positions included (padding is +0, exponent -16). ``(N, M, OH, OW)`` int8.

    The same as :func:`~quantemu.backends.nvdla.fp16.check.conv_max_exp` on the im2col windows,
    without building them for every output channel: one tap at a time, blocks of outputs.
    """
    m, cg, r, s = w.shape
    ed = window_columns(coarse_exponents(x), (r, s), strides=strides, dilations=dilations,
                        pads=pads, pad_value=-16)  # fmt: skip
    n, _, _, _, oh, ow = ed.shape
    ed = ed.reshape(n, group, cg, r * s, oh * ow)
    ew = coarse_exponents(w).reshape(group, m // group, cg, r * s)
    out = np.full((n, group, m // group, oh * ow), -64, dtype=np.int8)
    step = max(1, _CHUNK // max(1, n * m * cg))
    for t in range(r * s):
        for p0 in range(0, oh * ow, step):
            d = ed[:, :, None, :, t, p0 : p0 + step]  # (N, g, 1, C/g, P)
            k = ew[None, :, :, :, t, None]  # (1, g, M/g, C/g, 1)
            best = (d + k).max(axis=3)  # |e| <= 16 each: the int8 sum cannot overflow
            np.maximum(out[..., p0 : p0 + step], best, out=out[..., p0 : p0 + step])
    return out.reshape(n, m, oh, ow)


def pool_window_max(x: np.ndarray, kernel, *, strides, pads) -> np.ndarray:
    """The largest magnitude in each pooling window of NCHW float values (padding is 0)."""
    cols = window_columns(np.abs(x), kernel, strides=strides, pads=pads)
    return cols.max(axis=(2, 3))
