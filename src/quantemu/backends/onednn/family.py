"""Which kernel family oneDNN 3.12 picks for a convolution or a PyTorch quantized op (heuristic).

This follows the *informative* rules of the conformance page (§5.3, §6.2): what one host showed
for u8/s8 sources, f32 destinations and ``nhwc`` activations. oneDNN's real choice between
``brg_conv_fwd``, ``jit_int8`` and gemm-based convolution also depends on performance heuristics
(output channels, spatial size, thread count, cache sizes) that the page does not specify, so
``gemm`` is never predicted and a prediction can be wrong; when the family is known (for example
from ``ONEDNN_VERBOSE=1``), pass it explicitly instead. On VNNI/AMX ISAs and for s8 sources on
non-VNNI ISAs the family does not change the accumulator (only ``ref`` vs the rest matters for
the quantized ops' f32 order).
"""

from __future__ import annotations

from quantemu.backends.onednn.params import (
    ConvGeometry,
    ConvImpl,
    Isa,
    QuantizedImpl,
    SrcType,
    as_enum,
)
from quantemu.errors import InvalidInputError


def predict_conv_impl(
    isa: Isa | str,
    src_dt: SrcType | str,
    x_shape: tuple[int, int, int, int],
    w_shape: tuple[int, int, int, int],
    geometry: ConvGeometry,
    *,
    host_has_vbmi: bool = True,
) -> ConvImpl:
    """Predict the ``conv2d`` family for ``x (N, C, H, W)`` and ``w (O, C/groups, KH, KW)``.

    - ``avx2``: ``direct``; a grouped, non-depthwise convolution whose ``C/groups`` or
      ``O/groups`` is not a multiple of 4 falls back to ``ref``.
    - ``avx2_vnni``: ``direct`` (every kernel there is exact).
    - AVX-512 ISAs: depthwise is ``direct``; with one input channel per group and a host with
      AVX512-VBMI (a CPUID bit that ``ONEDNN_MAX_CPU_ISA`` does not mask), ``brg_conv_fwd``
      relocates the kernel: ``relo_wh`` if ``KH > 1``, ``OW > 4``, no dilation and (s8 source)
      no top/bottom padding; else ``relo_w`` if ``KW > 1`` and ``dw = 1``; else ``direct``.
    """
    isa = as_enum(Isa, isa, "isa")
    src_dt = as_enum(SrcType, src_dt, "src_dt")
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise InvalidInputError(
            f"predict_conv_impl: x_shape {x_shape} and w_shape {w_shape} must both have 4 dims"
        )
    o, cg, kh, kw = w_shape
    groups = geometry.groups
    og = o // groups
    depthwise = cg == 1 and og == 1
    if isa is Isa.AVX2:
        if groups > 1 and not depthwise and (cg % 4 or og % 4):
            return ConvImpl.REF
        return ConvImpl.DIRECT
    if isa is Isa.AVX2_VNNI or depthwise or cg != 1 or not host_has_vbmi:
        return ConvImpl.DIRECT
    _, ow = geometry.output_size(x_shape[2], x_shape[3], kh, kw)
    top, _, bottom, _ = geometry.pads
    dense = geometry.dilations == (1, 1)
    s8_padded = src_dt is SrcType.S8 and (top or bottom)
    if kh > 1 and ow > 4 and dense and not s8_padded:
        return ConvImpl.RELO_WH
    if kw > 1 and geometry.dilations[1] == 1:
        return ConvImpl.RELO_W
    return ConvImpl.DIRECT


def predict_quantized_linear_impl(isa: Isa | str) -> QuantizedImpl:
    """PyTorch's ``quantized::linear``: ``gemm:jit`` on avx2, ``brg_matmul`` elsewhere (§6.2)."""
    isa = as_enum(Isa, isa, "isa")
    return QuantizedImpl.JIT_UNI if isa is Isa.AVX2 else QuantizedImpl.BRGEMM


def predict_quantized_conv2d_impl(
    isa: Isa | str,
    x_shape: tuple[int, int, int, int],
    w_shape: tuple[int, int, int, int],
    geometry: ConvGeometry,
) -> QuantizedImpl:
    """PyTorch's ``quantized::conv2d`` family (heuristic).

    ``avx2``: ``jit_uni`` (``jit_uni_int8``), or ``ref`` for the grouped fallback of §5.3.
    Elsewhere ``brgemm``; ``jit_avx512`` (``jit_int8``) has the same f32 order and segments, so
    confusing the two changes nothing. On ``avx2_vnni`` some shapes run ``jit_uni_int8``, whose
    combined scale order can differ by one ulp before rounding: the page does not say which.
    """
    isa = as_enum(Isa, isa, "isa")
    if isa is Isa.AVX2:
        family = predict_conv_impl(isa, SrcType.U8, x_shape, w_shape, geometry)
        return QuantizedImpl.REF if family is ConvImpl.REF else QuantizedImpl.JIT_UNI
    return QuantizedImpl.BRGEMM
