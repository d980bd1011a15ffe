"""The onednn lowering options and the model header that records them.

:meth:`Options.from_mapping` (the framework's) types the values; :meth:`Options.__post_init__`
checks what the types cannot say: bools that are bools, ``threads >= 1``, per-layer family
mappings, and that linear runs only the families PyTorch's ``quantized::linear`` reaches.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from quantemu.backends.onednn.aten import (
    ADAPTIVE_POOL_VECTOR_CHANNELS,
    ADD_BLOCK,
    AVG_POOL_VECTOR_CHANNELS,
)
from quantemu.backends.onednn.params import ConvImpl, Isa, QuantizedImpl, as_enum
from quantemu.errors import InvalidInputError
from quantemu.program.options import LoweringOptions

RNN_LIBRARY = "3.2.0"  # the version the RNN vectors were recorded from (README "RNN")
LIBRARY = "oneDNN 3.12.0 and ATen quantized kernels, as in PyTorch 2.13.0+cpu (x86, AVX512 ATen)"


class Fallback(enum.Enum):
    """What to do with a node that has no integer lowering."""

    FLOAT = "float"  # dequantize, run the float kernel, requantize (exact=False, noted)
    ERROR = "error"  # raise UnsupportedError


class RnnData(enum.Enum):
    """Where an LSTM/GRU's u8 data qparams (``rnn_data_qparams``) come from."""

    SEED = "seed"  # oneDNN's recommendation: scale 127, shift 128 (states in [-1, 1])
    CALIBRATED = "calibrated"  # the calibrated range of the node's input and output


class RnnWeights(enum.Enum):
    """How many ``63 / W_max`` scales an LSTM/GRU's s8 weights take (``rnn_weights_qparams``)."""

    PER_TENSOR = "per_tensor"  # the seed's: W_max over every weight of the node (mask 0)
    PER_CHANNEL = "per_channel"  # one per gate and output channel (mask 24)


_IMPL_FIELDS = {
    "conv_impl": ConvImpl,
    "quantized_conv_impl": QuantizedImpl,
    "linear_impl": QuantizedImpl,
}

#: The graph ops each per-layer family option may name.
FAMILY_OPS = {
    "conv_impl": ("Conv",),
    "quantized_conv_impl": ("Conv",),
    "linear_impl": ("Gemm", "MatMul"),
}


@dataclasses.dataclass(frozen=True)
class Options(LoweringOptions):
    """Lowering options; every one that changes a result is in the model header.

    - ``isa``: oneDNN's int8 code path (``ONEDNN_MAX_CPU_ISA``); ``avx2`` and ``avx512_core``
      pair-saturate in ``VPMADDUBSW``.
    - ``reduce_range``: 7-bit activation qparams (PyTorch's default ``x86`` qconfig) or not
      (the ``onednn`` qconfig, the default here).
    - ``conv_impl`` / ``quantized_conv_impl`` / ``linear_impl``: a kernel family for every
      layer, or ``{node name: family}``; unnamed layers use the predictors of :mod:`..family`
      (``ONEDNN_VERBOSE=1`` shows what oneDNN really picked).
    - ``host_has_vbmi``: whether the host has AVX512-VBMI (the relocated-kernel prediction).
    - ``threads``: PyTorch's intra-op threads; they split the quantized add's loop, whose tails
      round differently.
    - ``fallback``: ``"float"`` or ``"error"`` for nodes without an integer lowering.
    - ``rnn_data``: ``"seed"`` (data scale 127, shift 128: oneDNN's recommendation) or
      ``"calibrated"`` (from the calibrated range of each LSTM/GRU's input and output) for the
      u8 states of oneDNN's RNN primitive.
    - ``rnn_weights``: ``"per_tensor"`` (the seed's one ``63 / W_max``) or ``"per_channel"``
      (one per gate and output channel) for its s8 weights.
    """

    backend: ClassVar[str] = "onednn"

    isa: Isa = Isa.AVX512_CORE_VNNI
    reduce_range: bool = False
    # A family for every layer, {node name: family}, or None (predicted).
    conv_impl: ConvImpl | Mapping[str, ConvImpl] | None = None
    quantized_conv_impl: QuantizedImpl | Mapping[str, QuantizedImpl] | None = None
    linear_impl: QuantizedImpl | Mapping[str, QuantizedImpl] | None = None
    host_has_vbmi: bool = True
    threads: int = 1
    fallback: Fallback = Fallback.FLOAT
    rnn_data: RnnData = RnnData.SEED
    rnn_weights: RnnWeights = RnnWeights.PER_TENSOR

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "isa", as_enum(Isa, self.isa, "option isa"))
        set_(self, "rnn_data", as_enum(RnnData, self.rnn_data, "option rnn_data"))
        set_(self, "rnn_weights", as_enum(RnnWeights, self.rnn_weights, "option rnn_weights"))
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
        "rnn": f"LSTM/GRU as oneDNN {RNN_LIBRARY}'s int8 RNN primitive "
        f"({rnn_implementation(opts.isa)}); data qparams {opts.rnn_data.value}, weights "
        f"63 / W_max {opts.rnn_weights.value}",
        "library": LIBRARY,
    }


def rnn_implementation(isa: Isa, *, short: bool = False) -> str:
    """The RNN implementation oneDNN 3.2.0 ran at ``isa`` when the vectors were recorded."""
    if isa.exact:
        return "brgemm" if short else f"brgemm:{isa.value}, exact dot products"
    return "ref" if short else "ref over gemm_s8u8s32, pair-saturating dot products"


def _describe_impl(value: Any) -> str:
    if value is None:
        return "predicted"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {v.value}" for k, v in value.items()) + "} else predicted"
    return value.value
