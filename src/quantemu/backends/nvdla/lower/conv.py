"""Conv and Gemm on NVDLA: CMAC products, CACC accumulation, the SDP output stage.

The convolution core multiplies int8 data by int8 weights exactly (CMAC has no intermediate
saturation) and CACC accumulates in 48 bits, then ``CLIP_TRUNCATE = 0`` and int32 saturation.
quantemu computes the sums with :func:`~quantemu.intmath.matmul_exact` (a BLAS GEMM on
integer-valued floats, exact by the bound ``B = max_m sum_k |w[m, k]| * 128`` that it derives
from the weights and the int8 input: every partial sum of any order lies in ``[-B, B]``).
``B < 2^47`` (K < 2^33) means the 48-bit clamp can never engage; when also ``B < 2^31`` the
int32 saturation cannot either, and ``acc_saturated`` is 0 by that proof. Otherwise the products
are summed in steps of at most 64 and those partial sums go through :func:`cacc`, which applies
the saturation and counts it (``SAT_COUNT``).

Gemm runs as a 1x1 convolution (NVIDIA's compiler maps fully connected layers onto the
convolution core), its input ``(N, K)`` seen as ``(N, K, 1, 1)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from quantemu.backends.nvdla.cacc import cacc
from quantemu.backends.nvdla.lower.context import NvdlaContext, f32
from quantemu.backends.nvdla.lower.options import Rescale, WeightScaling
from quantemu.backends.nvdla.lower.sdp import (
    SdpStage,
    activation_stage,
    converter_fields,
    leaky_fields,
    run_stages,
    sdp_counters,
)
from quantemu.backends.nvdla.quantize import quantize_bias_int16, quantize_weights, split_scales
from quantemu.backends.nvdla.registers import (
    AluAlgo,
    CaccRegisters,
    OperandSource,
    Precision,
    SdpRegisters,
)
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Attrs, Node
from quantemu.intmath import float32_round_half_up_add_floor, matmul_exact, window_columns
from quantemu.program import Layer, LayerOutput, LinearEncoding, QTensor
from quantemu.program.lowering import LoweringContext

INT32_LIMIT = 1 << 31
CACC_STEP = 64  # products per CACC step on the rare saturating path: |p| <= 64 * 2^14 = 2^20
CACC_REGS = CaccRegisters(PROC_PRECISION=int(Precision.INT8), CLIP_TRUNCATE=0)


@dataclass(frozen=True, kw_only=True)
class ConvLayer(Layer):
    """A Conv (or a Gemm as 1x1 conv): int8 weights ``[M, C/g, kh, kw]``, CACC, SDP stages."""

    encoding: LinearEncoding
    weights: np.ndarray  # int8 [M, C/g, kh, kw]
    attrs: Attrs  # group, pads, strides, dilations (normalized Conv attributes)
    dense: bool  # Gemm: (N, K) in, (N, M) out
    needs_cacc: bool  # the int32 saturation can engage (B >= 2^31): sum through cacc()
    stages: tuple[SdpStage, ...]
    acc_bound: int = INT32_LIMIT  # |acc| <= acc_bound: B from the weights, or int32 (CACC)
    # The GEMM's left operand (g, M/g, K/g) in the float type of the exactness bound, once.
    _kernel: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        m, cg, kh, kw = self.weights.shape
        g = self.attrs["group"]
        # float32 holds int8 exactly: matmul_exact's float GEMMs (or runs of them) read it as
        # is, and its int8 engine takes it as s8 weights.
        kernel = self.weights.reshape(g, m // g, cg * kh * kw).astype(np.float32)
        kernel.setflags(write=False)
        object.__setattr__(self, "_kernel", kernel)

    def compute(self, inputs: list[QTensor]) -> LayerOutput:
        """Accumulate (exact GEMM or CACC steps), then the SDP passes."""
        x = np.asarray(inputs[0].codes)
        if self.dense:
            x = x.reshape(x.shape[0], -1, 1, 1)
        if self.needs_cacc:
            r = cacc(self._partials(x), CACC_REGS)
            acc, sat = r.y.astype(np.int64), r.SAT_COUNT
        else:
            acc, sat = self._accumulate(x), 0  # |acc| <= B < 2^31: no CACC saturation
        bound = min(self.acc_bound, INT32_LIMIT - 1)  # CACC saturates to int32 when B >= 2^31
        y, results = run_stages(self.stages, acc, bound=(-bound - self.needs_cacc, bound))
        if self.dense:
            y, acc = y.reshape(y.shape[0], -1), acc.reshape(acc.shape[0], -1)
        counters = {"acc_saturated": sat, **sdp_counters(results)}
        codes = y.astype(np.int8, copy=False)  # int8 already from the fused SDP path
        return LayerOutput(QTensor(codes, self.encoding), counters, {"acc": acc})

    def _columns(self, x: np.ndarray) -> tuple[np.ndarray, int, int]:
        """im2col: ``(N, C, kh*kw, OH*OW)`` int8 codes (zero padding = code 0), in one copy
        laid out as the GEMM reads it: the int8 engine takes it without a conversion pass."""
        a = self.attrs
        kh, kw = self.weights.shape[2:]
        full = window_columns(x, (kh, kw), strides=a["strides"], dilations=a["dilations"],
                              pads=a["pads"])  # fmt: skip
        n, c = x.shape[:2]
        oh, ow = full.shape[-2:]
        return full.reshape(n, c, kh * kw, oh * ow), oh, ow

    def _accumulate(self, x: np.ndarray) -> np.ndarray:
        """Exact sums by one (grouped) GEMM; int64 ``(N, M, OH, OW)``."""
        g, mg, kg = self._kernel.shape
        cols, oh, ow = self._columns(x)
        n = cols.shape[0]
        cols = cols.reshape(n, g, kg, oh * ow)
        # The weights are matmul_exact's right operand (a transposed view of the read-only
        # kernel), so its exactness plan comes from their column sums, once; the columns are
        # read transposed by BLAS, without a copy.
        kernel_t = self._kernel.transpose(0, 2, 1)  # (g, K/g, M/g)
        if g == 1:
            a, b = cols[:, 0].transpose(0, 2, 1), kernel_t[0]  # (N, P, K) @ (K, M)
        else:
            a, b = cols.transpose(0, 1, 3, 2), kernel_t  # (N, g, P, K/g) @ (g, K/g, M/g)
        # int32 where the int8 engine computes it (its s32 sums are exact, |acc| <= B < 2^31):
        # the SDP starts from int32 within the bound compute() passes, with no widening pass.
        out = matmul_exact(a, b, a_max=128, allow_int32=True)
        out = np.ascontiguousarray(out.swapaxes(-1, -2))
        return out.reshape(n, g * mg, oh, ow)

    def _partials(self, x: np.ndarray) -> np.ndarray:
        """CACC steps: sums over blocks of input channels, ``(J, N, M, OH, OW)`` int64."""
        m, c, kh, kw = self.weights.shape  # group == 1 on this path (checked when lowering)
        step = max(1, CACC_STEP // (kh * kw))
        j = -(-c // step)
        cols, oh, ow = self._columns(x)
        n = cols.shape[0]
        pad = ((0, 0), (0, j * step - c), (0, 0), (0, 0))
        cols = np.pad(cols, pad).reshape(n, j, step * kh * kw, oh * ow)
        w = np.pad(self.weights, ((0, 0), (0, j * step - c), (0, 0), (0, 0)))
        w = w.reshape(m, j, step * kh * kw).transpose(1, 0, 2)  # (J, M, Kc)
        # (N, J, M, P): each |sum| <= Kc * 2^14 <= 2^21
        p = matmul_exact(w[None], cols, a_max=128, b_max=128)
        return np.ascontiguousarray(p.transpose(1, 0, 2, 3)).reshape(j, n, m, oh, ow)


def _filter_weights(w: np.ndarray, per_filter: bool) -> tuple[np.ndarray, np.ndarray]:
    """Int8 weights and float32 scales per output channel (the compiler's rule, float32)."""
    m = w.shape[0]
    if not per_filter:
        q, s = quantize_weights(w)
        return q, np.full(m, s, dtype=np.float32)
    wf = np.asarray(w, dtype=np.float32).reshape(m, -1)
    amax = np.abs(wf).max(axis=1)
    scale = np.where(amax > 0, amax / np.float32(127), np.float32(1)).astype(np.float32)
    q = float32_round_half_up_add_floor(wf / scale[:, None])
    return np.clip(q, -128, 127).astype(np.int8).reshape(w.shape), scale


def _override_weights(ctx: NvdlaContext, name: str, shape) -> tuple[np.ndarray, np.ndarray] | None:
    """The file's int8 weights and scales for a QDQ weight (per tensor or per output channel)."""
    ov = ctx.graph.quant_overrides.get(name)
    if ov is None or ov.values is None:
        return None
    zp = np.asarray(ov.zero_point)
    if zp.dtype != np.int8 or np.any(zp != 0) or ov.axis not in (None, 0):
        raise UnsupportedError(
            f"nvdla lowering: weight {name!r} is quantized as {zp.dtype} zero point "
            f"{zp.ravel()[:4].tolist()} axis {ov.axis}; NVDLA weights are symmetric int8, per "
            "kernel or per output channel (axis 0)"
        )
    scale = np.broadcast_to(np.asarray(ov.scale, dtype=np.float32), (shape[0],))
    return np.asarray(ov.values, dtype=np.int8).reshape(shape), np.array(scale)


def _sdp_fields(ctx: NvdlaContext, node: Node, scales, bias) -> tuple[dict, dict]:
    """Registers and per-channel operands of the conv's SDP (bias, rescale, fused activation).

    ``scales`` = ``(s_in, s_w [M], s_out)``.
    """
    opts = ctx.options
    s_in, s_w, s_out = scales
    fields: dict[str, int] = {"BS_BYPASS": 0}
    operands: dict[str, np.ndarray] = {}
    if bias is not None:
        b16, shift = quantize_bias_int16(bias, s_in, s_w)
        fields.update(BS_ALU_BYPASS=0, BS_ALU_ALGO=int(AluAlgo.SUM), BS_ALU_SHIFT_VALUE=shift)
        fields["BS_ALU_SRC"] = int(OperandSource.MEMORY)
        operands["BS_ALU"] = b16
    factors = f32(s_in) * np.asarray(s_w, np.float32) / np.float32(s_out)
    uniform = bool(np.all(factors == factors[0]))
    if opts.rescale is Rescale.BS_MUL or (opts.rescale is Rescale.AUTO and not uniform):
        scales, shift = split_scales(factors, how=opts.scale_split)
        fields.update(BS_MUL_BYPASS=0, BS_MUL_SHIFT_VALUE=shift)
        fields["BS_MUL_SRC"] = int(OperandSource.MEMORY)
        operands["BS_MUL"] = scales
    elif not uniform:
        raise InvalidInputError(
            f"rescale=output_converter needs one factor per layer, but {node.name!r} has "
            "per-channel weight scales (a per-axis QDQ weight); use rescale=auto or bs_mul"
        )
    else:
        fields.update(converter_fields(float(factors[0]), opts.scale_split))
    act = node.attrs.get("activation")
    if act == "relu":
        fields["BS_RELU_BYPASS"] = 0
    elif act == "leaky_relu":
        fields.update(leaky_fields("BN", float(node.attrs["activation_alpha"])))
    return fields, operands


def _weights_and_bias(ctx: NvdlaContext, node: Node):
    """Float weights ``[M, C/g, kh, kw]`` and bias ``[M]`` (Gemm's alpha/beta folded in)."""
    if node.op_type == "Conv":
        w = ctx.const(node.inputs[1])
        b = ctx.const(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
        return node.inputs[1], w, b
    a = node.attrs
    w = ctx.const(node.inputs[1])
    if w is None:
        return node.inputs[1], None, None
    if a.get("transA", 0):
        raise UnsupportedError(f"{node}: transA=1 (a transposed activation) is not supported")
    w = w if a.get("transB", 0) else w.T
    w = (np.float32(a.get("alpha", 1.0)) * w.astype(np.float32)).reshape(w.shape[0], -1, 1, 1)
    b = None
    if len(node.inputs) > 2 and node.inputs[2]:
        c = ctx.const(node.inputs[2])
        if c is None:
            raise UnsupportedError(f"{node}: a computed bias C is not supported (constant only)")
        c = np.float32(a.get("beta", 1.0)) * c.astype(np.float32).reshape(-1)
        if c.size not in (1, w.shape[0]):
            raise UnsupportedError(
                f"{node}: bias C of shape {ctx.shape(node.inputs[2])} is not "
                f"per output feature ({w.shape[0]},); NVDLA adds a per-channel bias"
            )
        b = np.broadcast_to(c, (w.shape[0],))
    return node.inputs[1], w, b


def _check_dense_input(ctx: NvdlaContext, node: Node) -> None:
    if node.op_type == "MatMul" and ctx.const(node.inputs[1]) is None:
        raise UnsupportedError(
            f"{node}: both operands ({node.inputs[0]!r}, {node.inputs[1]!r}) are activations "
            "(a product such as attention's q @ k^T); NVDLA's only matrix-product unit, the "
            "convolution core (CMAC), multiplies activations by constant weights from the weight "
            "blob"
        )
    shape = ctx.shape(node.inputs[0])
    if len(shape) != 2:
        raise UnsupportedError(
            f"{node}: input {node.inputs[0]!r} has shape {shape}; NVDLA fully connected layers "
            "take (N, K) inputs (Flatten first)"
        )


def conv_attrs(node: Node) -> Attrs:
    """The node's Conv attributes; a Gemm/MatMul's as a 1x1 convolution's."""
    if node.op_type == "Conv":
        return node.attrs
    return Attrs({"group": 1, "pads": (0, 0, 0, 0), "strides": (1, 1), "dilations": (1, 1)})


def constant_weights(ctx: LoweringContext, node: Node):
    """``(name, float weights [M, C/g, kh, kw], bias [M] or None, dense)`` of a Conv, or of a
    Gemm/MatMul (as a 1x1 convolution); what the convolution core cannot take is an error."""
    dense = node.op_type != "Conv"
    if dense:
        _check_dense_input(ctx, node)
    wname, w, bias = _weights_and_bias(ctx, node)
    if w is None:
        raise UnsupportedError(
            f"{node}: weights {wname!r} are computed, not constant; NVDLA's convolution core "
            "reads weights from a constant blob"
        )
    return wname, w, bias, dense


def lower_conv(ctx: NvdlaContext, node: Node) -> ConvLayer:
    """Conv / Gemm / MatMul (constant weights) -> CMAC + CACC + SDP (bias, rescale, act)."""
    wname, w, bias, dense = constant_weights(ctx, node)
    fixed = _override_weights(ctx, wname, w.shape)
    if fixed is not None and dense and float(node.attrs.get("alpha", 1.0)) != 1.0:
        raise UnsupportedError(f"{node}: alpha != 1 with QDQ-quantized weights is not supported")
    per_filter = ctx.options.weights is WeightScaling.PER_FILTER
    q, s_w = fixed if fixed is not None else _filter_weights(w, per_filter)
    s_in, enc = ctx.encoding(node.inputs[0]).scale, ctx.new_encoding(node.outputs[0])
    attrs = conv_attrs(node)
    fields, operands = _sdp_fields(ctx, node, (s_in, s_w, enc.scale), bias)
    stages = [SdpStage(SdpRegisters(**fields), operands)]
    if node.attrs.get("activation") == "clip":
        stages.append(activation_stage("clip", node.attrs, enc.scale, enc.scale))
    q = np.asarray(q, np.int8)
    # B = max_m sum_k |w[m, k]| * 128 (int64 sums of at most 2^39 terms of <= 128: exact)
    bound = int(np.abs(q.astype(np.int64)).reshape(q.shape[0], -1).sum(axis=1).max()) * 128
    needs_cacc = bound >= INT32_LIMIT
    if needs_cacc and attrs["group"] != 1:
        raise UnsupportedError(
            f"{node}: grouped convolution whose accumulator can reach 2^31 (bound {bound}) is "
            "not supported; the CACC saturation path needs group = 1"
        )
    note = (
        f"CACC modeled: |acc| <= {bound} can reach 2^31"
        if needs_cacc
        else f"CACC cannot saturate: |acc| <= {bound} < 2^31"
    )
    note += "; clip applied on the int8 output (X-unit MAX/MIN pass)" if len(stages) > 1 else ""
    return ctx.layer(ConvLayer, node, op="cacc+sdp" + ("(fc)" if dense else ""),
                     inputs=node.inputs[:1], note=note, encoding=enc,
                     weights=q, attrs=attrs,
                     dense=dense, needs_cacc=needs_cacc, stages=tuple(stages),
                     acc_bound=bound)  # fmt: skip
