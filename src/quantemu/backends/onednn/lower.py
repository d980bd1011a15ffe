"""Lower a float graph onto oneDNN as PyTorch's x86 quantization (engine ``onednn``) runs it.

``lower(graph, ranges, **options) -> LoweredModel``. The scheme is PyTorch's
(``shared/notes/toolchains.md``, oneDNN section):

- activations: ``quint8`` per tensor, affine; ``(scale, zero_point)`` of PyTorch's observers
  from the calibrated ``(min, max)`` (:func:`.quantize.activation_qparams`, ``reduce_range``
  as the ``x86`` qconfig sets it, or not as the ``onednn`` qconfig does); the input is quantized
  by ``torch.quantize_per_tensor``'s arithmetic (:class:`.lower_aten.TorchU8Encoding`);
- weights: ``qint8`` per output channel, symmetric; bias float32, added in f32;
- Conv / Gemm / MatMul: oneDNN's int8 convolution / matmul on ``isa`` and the f32
  requantization of PyTorch's ``quantized::conv2d`` / ``linear`` (page §6), fused ReLU as the
  ``_relu`` ops do (codes ``max(y, zero_point)``);
- Add, AveragePool, GlobalAveragePool, Relu, Clip, MaxPool: PyTorch's ATen quantized kernels
  (:mod:`.lower_aten`), bit for bit; pools, ReLU, Clip and reshapes keep their input's qparams,
  as PyTorch's quantized ops do;
- anything else: a float fallback layer (``exact=False``) or, with ``fallback="error"``,
  ``UnsupportedError``.

A QDQ model's ``quant_overrides`` replace calibration (s8 activations become u8 with the zero
point shifted by 128: the same real values); a Q/DQ pair's saturating Clip hands its override to
the tensor it clamps, so that the producer writes the pair's codes directly.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from quantemu.backends.onednn.lower_aten import (
    ADAPTIVE_POOL_VECTOR_CHANNELS,
    ADD_BLOCK,
    AVG_POOL_VECTOR_CHANNELS,
    TorchU8Encoding,
)
from quantemu.backends.onednn.lower_layers import FloatFallbackLayer
from quantemu.backends.onednn.lower_nodes import (
    BUILDERS,
    KEEPS_QPARAMS,
    REQUANTIZING_POOLS,
    Context,
    NotLowerable,
)
from quantemu.backends.onednn.params import ConvImpl, Isa, QuantizedImpl, as_enum
from quantemu.backends.onednn.quantize import activation_qparams
from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Graph, Node
from quantemu.program import Layer, LoweredModel
from quantemu.program.options import LoweringOptions

LIBRARY = "oneDNN 3.12.0 and ATen quantized kernels, as in PyTorch 2.13.0+cpu (x86, AVX512 ATen)"


class Fallback(enum.Enum):
    """What to do with a node that has no integer lowering."""

    FLOAT = "float"  # dequantize, run the float kernel, requantize (exact=False, noted)
    ERROR = "error"  # raise UnsupportedError


_IMPL_FIELDS = {
    "conv_impl": ConvImpl,
    "quantized_conv_impl": QuantizedImpl,
    "linear_impl": QuantizedImpl,
}


@dataclasses.dataclass(frozen=True)
class Options(LoweringOptions):
    """Lowering options; every one that changes a result is in the model header.

    - ``isa``: oneDNN's int8 code path (``ONEDNN_MAX_CPU_ISA``); ``avx2`` and ``avx512_core``
      pair-saturate in ``VPMADDUBSW``.
    - ``reduce_range``: 7-bit activation qparams (PyTorch's default ``x86`` qconfig) or not
      (the ``onednn`` qconfig, the default here).
    - ``conv_impl`` / ``quantized_conv_impl`` / ``linear_impl``: a kernel family for every
      layer, or ``{node name: family}``; unnamed layers use the predictors of :mod:`.family`
      (``ONEDNN_VERBOSE=1`` shows what oneDNN really picked).
    - ``host_has_vbmi``: whether the host has AVX512-VBMI (the relocated-kernel prediction).
    - ``threads``: PyTorch's intra-op threads; they split the quantized add's loop, whose tails
      round differently.
    - ``fallback``: ``"float"`` or ``"error"`` for nodes without an integer lowering.
    """

    backend: ClassVar[str] = "onednn"

    isa: Isa = Isa.AVX512_CORE_VNNI
    reduce_range: bool = False
    conv_impl: Any = None
    quantized_conv_impl: Any = None
    linear_impl: Any = None
    host_has_vbmi: bool = True
    threads: int = 1
    fallback: Fallback = Fallback.FLOAT

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "isa", as_enum(Isa, self.isa, "option isa"))
        set_(self, "fallback", as_enum(Fallback, self.fallback, "option fallback"))
        for name in ("reduce_range", "host_has_vbmi"):
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):
                raise InvalidInputError(f"option {name} = {value!r} must be True or False")
            set_(self, name, bool(value))
        if isinstance(self.threads, bool) or not isinstance(self.threads, (int, np.integer)):
            raise InvalidInputError(f"option threads = {self.threads!r} must be an integer >= 1")
        if self.threads < 1:
            raise InvalidInputError(f"option threads = {self.threads} must be >= 1")
        for name, cls in _IMPL_FIELDS.items():
            set_(self, name, _impl_option(getattr(self, name), cls, name))
        linear = self.linear_impl
        for impl in linear.values() if isinstance(linear, Mapping) else [linear]:
            if impl not in (None, QuantizedImpl.JIT_UNI, QuantizedImpl.BRGEMM):
                raise InvalidInputError(
                    f"option linear_impl = {impl.value!r}: PyTorch's linear runs 'jit_uni' "
                    "(gemm:jit) or 'brgemm' (brg_matmul)"
                )

    @classmethod
    def parse(cls, **options: Any) -> Options:
        """``Options(**options)`` with unknown names reported with the valid ones."""
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise InvalidInputError(
                f"unknown onednn option(s) {', '.join(map(repr, unknown))}; valid options: "
                f"{', '.join(known)}"
            )
        return cls(**options)

    def pick(self, name: str, node: str) -> Any:
        """The family chosen for ``node`` by option ``name`` (None: predict it)."""
        value = getattr(self, name)
        return value.get(node) if isinstance(value, Mapping) else value


def _impl_option(value: Any, cls: type[enum.Enum], name: str) -> Any:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return MappingProxyType(
            {str(k): as_enum(cls, v, f"option {name}[{k!r}]") for k, v in value.items()}
        )
    return as_enum(cls, value, f"option {name}")


def lower(
    graph: Graph, ranges: Mapping[str, Any], options: Options | None = None, **kwargs: Any
) -> LoweredModel:
    """Lower ``graph`` (optimized) with calibrated ``ranges`` (tensor -> (min, max)).

    ``options``: an :class:`Options`, or keyword options for :meth:`Options.from_mapping`.
    """
    opts = options if isinstance(options, Options) else Options.from_mapping(kwargs)
    if not isinstance(graph, Graph):
        raise InvalidInputError(f"lower: graph must be a quantemu Graph, got {type(graph)}")
    _check_named_layers(graph, opts)
    encodings = assign_encodings(graph, ranges, opts)
    ctx = Context(graph, encodings, opts)
    layers = tuple(_lower_node(ctx, node) for node in graph.nodes)
    return LoweredModel(
        backend="onednn",
        input_encodings={i.name: encodings[i.name] for i in graph.inputs},
        layers=layers,
        header=header(opts),
    )


_FAMILY_OPS = {
    "conv_impl": ("Conv",),
    "quantized_conv_impl": ("Conv",),
    "linear_impl": ("Gemm", "MatMul"),
}


def _check_named_layers(graph: Graph, opts: Options) -> None:
    """Every node a per-layer family option names exists and has the right op."""
    for name, ops in _FAMILY_OPS.items():
        value = getattr(opts, name)
        if not isinstance(value, Mapping):
            continue
        nodes = {n.name for n in graph.nodes if n.op_type in ops}
        unknown = sorted(set(value) - nodes)
        if unknown:
            raise InvalidInputError(
                f"option {name} names {', '.join(map(repr, unknown))}, which are not "
                f"{'/'.join(ops)} nodes of the graph; those are: {', '.join(sorted(nodes))}"
            )


def header(opts: Options) -> dict[str, str]:
    """Every result-changing choice, for report headers."""
    impls = {n: getattr(opts, n) for n in _IMPL_FIELDS}
    return {
        "backend": "onednn",
        "isa": opts.isa.value,
        "dot_product": opts.isa.dot_product.value,
        "scheme": "PyTorch x86 (engine onednn): u8 per-tensor affine activations, s8 "
        "per-channel symmetric weights, f32 bias",
        "reduce_range": str(opts.reduce_range),
        "kernel_families": ", ".join(f"{k}={_describe_impl(v)}" for k, v in impls.items()),
        "host_has_vbmi": str(opts.host_has_vbmi),
        "threads": str(opts.threads),
        "rounding": "binary32 requantization, round half to even (cvtps2dq), saturating packs; "
        "input quantization rne(fma(x, 1/s, zp))",
        "aten_kernels": f"add blocks of {ADD_BLOCK}, avg_pool2d {AVG_POOL_VECTOR_CHANNELS} "
        f"channels/vector, adaptive_avg_pool2d {ADAPTIVE_POOL_VECTOR_CHANNELS}; channels-last",
        "fallback": opts.fallback.value,
        "library": LIBRARY,
    }


def _describe_impl(value: Any) -> str:
    if value is None:
        return "predicted"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {v.value}" for k, v in value.items()) + "} else predicted"
    return value.value


def _lower_node(ctx: Context, node: Node) -> Layer:
    if len(node.outputs) != 1:
        raise UnsupportedError(f"{node}: {len(node.outputs)} outputs; one output is lowered")
    builder = BUILDERS.get(node.op_type)
    try:
        if builder is None:
            raise NotLowerable("no integer lowering for this operator")
        return builder(ctx, node)
    except NotLowerable as why:
        if ctx.options.fallback is Fallback.ERROR:
            raise UnsupportedError(
                f"node {node.name!r} ({node.op_type}): {why}; integer lowerings exist for "
                f"{', '.join(sorted(BUILDERS))} (pass fallback='float' to run the rest in float)"
            ) from None
        return _fallback(ctx, node, str(why))


def _fallback(ctx: Context, node: Node, why: str) -> FloatFallbackLayer:
    consts = tuple(
        (i, np.asarray(ctx.graph.initializers[n]))
        for i, n in enumerate(node.inputs)
        if n in ctx.graph.initializers
    )
    activations = tuple(n for n in node.inputs if n and n not in ctx.graph.initializers)
    note = (
        f"float fallback ({why}): inputs dequantized, float32 {node.op_type} kernel, output "
        "requantized with torch.quantize_per_tensor's rule; not PyTorch's quantized kernel"
    )
    return FloatFallbackLayer(
        **{**ctx.base(node, f"float:{node.op_type}", activations, note), "exact": False},
        node=node,
        constants=consts,
    )


def assign_encodings(
    graph: Graph, ranges: Mapping[str, Any], opts: Options
) -> dict[str, TorchU8Encoding]:
    """The ``quint8`` qparams of every activation tensor, in graph order (see the docstring)."""
    adopted = _adopted_overrides(graph)
    enc: dict[str, TorchU8Encoding] = {}

    def from_data(name: str) -> TorchU8Encoding:
        if name in graph.quant_overrides:
            return _override_encoding(graph, name)
        if name in adopted:
            return _override_encoding(graph, adopted[name])
        return _range_encoding(ranges, name, opts.reduce_range)

    for info in graph.inputs:
        enc[info.name] = from_data(info.name)
    for node in graph.nodes:
        out = node.outputs[0]
        source = node.inputs[0] if node.inputs else ""
        if node.op_type in KEEPS_QPARAMS and source in enc:
            enc[out] = enc[source]
            given = out in graph.quant_overrides or out in adopted
            if given and not (mine := from_data(out)).same_params(enc[source]):
                if node.op_type not in REQUANTIZING_POOLS:
                    raise UnsupportedError(
                        f"node {node.name!r} ({node.op_type}): the file quantizes its output "
                        f"{out!r} as {mine.describe()} but its input {source!r} as "
                        f"{enc[source].describe()}; PyTorch's quantized {node.op_type} keeps "
                        "its input's scale and zero point: give both the same"
                    )
                enc[out] = mine
        else:
            enc[out] = from_data(out)
    return enc


def _adopted_overrides(graph: Graph) -> dict[str, str]:
    """Tensor -> the overridden tensor whose qparams it takes: a Q/DQ pair's saturating Clip.

    ``x -> Clip -> x'`` with an override on ``x'`` only, ``x`` read by that Clip alone: PyTorch
    would have quantized ``x`` itself with those qparams, so ``x`` takes them and the Clip
    becomes a no-op clamp on the codes.
    """
    adopted = {}
    for node in graph.nodes:
        if node.op_type != "Clip" or node.outputs[0] not in graph.quant_overrides:
            continue
        x = node.inputs[0]
        if x not in graph.quant_overrides and len(graph.consumers(x)) == 1:
            adopted[x] = node.outputs[0]
    return adopted


def _override_encoding(graph: Graph, name: str) -> TorchU8Encoding:
    ov = graph.quant_overrides[name]
    scale, zero = np.asarray(ov.scale), np.asarray(ov.zero_point)
    if scale.size != 1 or ov.axis is not None:
        raise UnsupportedError(
            f"tensor {name!r} is quantized per axis in the file; PyTorch's x86 scheme quantizes "
            "activations per tensor"
        )
    shift = {"uint8": 0, "int8": 128}.get(zero.dtype.name)
    if shift is None:
        raise UnsupportedError(
            f"tensor {name!r} is quantized as {zero.dtype.name} in the file; activations here "
            "are u8 (an s8 tensor is taken as u8 with zero point + 128)"
        )
    return TorchU8Encoding(float(np.float32(scale.reshape(()))), int(zero.reshape(())) + shift)


def _range_encoding(ranges: Mapping[str, Any], name: str, reduce_range: bool) -> TorchU8Encoding:
    if name not in ranges:
        raise InvalidInputError(
            f"no calibrated range for tensor {name!r}; calibrate the graph being lowered "
            "(quantemu.calibrate(optimize(graph), data)) or give the tensor a QDQ override"
        )
    lo, hi = ranges[name]
    lo, hi = float(np.min(lo)), float(np.max(hi))  # a per-channel range: its envelope
    scale, zero_point = activation_qparams(lo, hi, reduce_range=reduce_range)
    return TorchU8Encoding(scale, zero_point)
