"""Per-op normalization of ONNX nodes into IR nodes (attributes and attribute-like inputs).

Every supported op has a normalizer that (1) rejects attributes it does not know, naming the node,
the op and the attributes it does know; (2) fills every default for the model's opset; (3) folds
constant attribute-like inputs (Clip min/max, Reshape shape, Resize scales/sizes, ReduceMean axes,
Dropout ratio/training_mode) into attributes, rejecting non-constant ones; and (4) resolves
layout conveniences (auto_pad into explicit pads, negative axes, Transpose's default perm).
The normalized attributes of each op are listed in the docstrings of :mod:`quantemu.graph.ops`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx.defs

from quantemu.errors import InvalidInputError, UnsupportedError
from quantemu.graph.ir import Node, TensorInfo
from quantemu.graph.ops._spec import known


@dataclass
class RawNode:
    """An ONNX node with its attributes decoded to Python values (strings, lists, arrays)."""

    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.op_type} '{self.name}'"


@dataclass
class Context:
    """What a normalizer may look at: the opset, constant values, and known tensor infos."""

    opset: int
    consts: dict[str, np.ndarray]
    tensors: dict[str, TensorInfo]
    used: set[str]
    #: Values computed from a symbolic dimension (see :mod:`quantemu.graph.onnx_shape_fold`).
    derived: dict[str, Any] = field(default_factory=dict)

    def const(self, raw: RawNode, index: int, role: str) -> np.ndarray | None:
        """The constant value of input ``index`` (``None`` when omitted)."""
        if index >= len(raw.inputs) or not raw.inputs[index]:
            return None
        name = raw.inputs[index]
        if name not in self.consts:
            raise UnsupportedError(
                f"{raw}: input {index} ({role}, {name!r}) is computed at run time; quantemu "
                f"supports {raw.op_type} only with a constant (initializer) {role}"
            )
        return self.consts[name]

    def info(self, raw: RawNode, index: int = 0) -> TensorInfo:
        """The shape/dtype info of input ``index``."""
        return self.tensors[raw.inputs[index]]


#: The default-domain opsets the importer accepts: every one the installed ``onnx`` package
#: defines. What each op means at the model's opset is bounded per op by :data:`REVIEWED`.
MIN_OPSET, MAX_OPSET = 1, int(onnx.defs.onnx_opset_version())

#: For each op, the oldest and the newest ONNX versions (``since_version``) whose attributes,
#: inputs and semantics its normalizer and kernel were checked against (onnx 1.23, opset 28).
#: Opsets 22 to 25 only widened these ops' types (bfloat16, float8, int4...), which quantemu
#: computes in float32. Older versions (Add-6's ``broadcast``, Relu-1's ``consumed_inputs``...)
#: and versions a newer ``onnx`` adds are refused by :func:`check_reviewed`, naming both.
#: Modules registering other normalizers add their own entries; ops without one are taken
#: from opset :data:`LEGACY_OPSET` on.
REVIEWED: dict[str, tuple[int, int]] = {
    "Add": (7, 14), "AveragePool": (7, 22), "BatchNormalization": (7, 15), "Clip": (6, 13),
    "Concat": (4, 13), "Conv": (1, 22), "ConvTranspose": (1, 22), "Div": (7, 14),
    "Dropout": (7, 22), "Erf": (9, 13), "Flatten": (1, 25), "Gelu": (20, 20), "Gemm": (7, 13),
    "GlobalAveragePool": (1, 22), "GlobalMaxPool": (1, 22), "HardSigmoid": (6, 22),
    "HardSwish": (14, 22), "Identity": (1, 25), "LRN": (1, 13), "LayerNormalization": (17, 17),
    "LeakyRelu": (6, 16), "MatMul": (1, 13), "MaxPool": (8, 22), "Mul": (7, 14),
    "PRelu": (7, 16), "Pad": (2, 25), "Pow": (7, 15), "Reciprocal": (6, 13),
    "ReduceMean": (1, 18), "Relu": (6, 14), "Reshape": (5, 25), "Resize": (10, 19),
    "Sigmoid": (6, 13), "Softmax": (1, 13), "Sqrt": (6, 13), "Squeeze": (1, 25), "Sub": (7, 14),
    "Tanh": (6, 13), "Transpose": (1, 25), "Unsqueeze": (1, 25), "Upsample": (7, 10),
}  # fmt: skip
LEGACY_OPSET = 9


def check_reviewed(raw: RawNode, opset: int) -> None:
    """Refuse an op whose definition at ``opset`` is one quantemu has not reviewed."""
    oldest, newest = REVIEWED.get(raw.op_type, (0, 10**6))
    if raw.op_type not in REVIEWED and opset < LEGACY_OPSET:
        raise UnsupportedError(
            f"{raw}: {raw.op_type} is supported from opset {LEGACY_OPSET}, the model imports "
            f"opset {opset}; convert it with onnx.version_converter.convert_version"
        )
    try:
        version = onnx.defs.get_schema(raw.op_type, opset).since_version
    except onnx.defs.SchemaError:  # not defined at this opset: the normalizer's own check
        return
    if not oldest <= version <= newest:
        raise UnsupportedError(
            f"{raw}: {raw.op_type} at opset {opset} is version {version}, which quantemu does "
            f"not handle (it handles {raw.op_type} versions {oldest} to {newest}); convert the "
            "model with onnx.version_converter.convert_version"
        )


Normalizer = Callable[[RawNode, Context], Node]
NORMALIZERS: dict[str, Normalizer] = {}


def normalizer(*op_types: str) -> Callable[[Normalizer], Normalizer]:
    """Register the decorated function as the normalizer of ``op_types``."""

    def decorate(fn: Normalizer) -> Normalizer:
        for op_type in op_types:
            NORMALIZERS[op_type] = fn
        return fn

    return decorate


def check_attrs(raw: RawNode, allowed: Iterable[str]) -> None:
    """Reject attributes outside ``allowed`` with a message naming the supported ones."""
    allowed = set(allowed)
    unknown = sorted(set(raw.attrs) - allowed)
    if unknown:
        supported = ", ".join(sorted(allowed)) or "none"
        raise UnsupportedError(
            f"{raw}: attribute {', '.join(map(repr, unknown))} is not supported for "
            f"{raw.op_type}; supported attributes: {supported}"
        )


def require(raw: RawNode, condition: bool, message: str) -> None:
    """Raise :class:`UnsupportedError` about ``raw`` unless ``condition``."""
    if not condition:
        raise UnsupportedError(f"{raw}: {message}")


def make(raw: RawNode, inputs: Iterable[str], attrs: dict[str, Any], outputs=None) -> Node:
    """The IR node for ``raw`` with the given data inputs and normalized attributes."""
    return Node(raw.name, raw.op_type, tuple(inputs), tuple(outputs or raw.outputs[:1]), attrs)


def single_output(raw: RawNode, ctx: Context, extra: str) -> None:
    """Optional training-only outputs (``extra``) may be declared but never used."""
    for name in raw.outputs[1:]:
        require(
            raw,
            not name or name not in ctx.used,
            f"output {name!r} ({extra}) is used, "
            "but quantemu imports inference graphs only; remove that use",
        )


def _ints(raw: RawNode, key: str, default: Iterable[int]) -> tuple[int, ...]:
    return tuple(int(v) for v in raw.attrs.get(key, default))


# -- convolution and pooling ---------------------------------------------------------------


def spatial_attrs(raw: RawNode, ctx: Context, kernel: tuple[int, ...], *, dilations=True):
    """kernel_shape, strides, dilations and explicit pads ``(top, left, bottom, right)``."""
    x = ctx.info(raw)
    require(
        raw,
        x.rank == 4 and len(kernel) == 2,
        f"only 2-D {raw.op_type} on NCHW input is "
        f"supported; input shape {x.shape}, kernel {kernel}",
    )
    strides = _ints(raw, "strides", (1, 1))
    dil = _ints(raw, "dilations", (1, 1)) if dilations else (1, 1)
    pads = _ints(raw, "pads", (0, 0, 0, 0))
    if len(strides) != 2 or len(dil) != 2 or len(pads) != 4:
        raise InvalidInputError(
            f"{raw}: strides {strides}, dilations {dil} or pads {pads} do not fit a 2-D kernel"
        )
    if min(kernel) < 1:
        raise InvalidInputError(f"{raw}: kernel {kernel} must be at least 1x1")
    if min(strides) < 1 or min(dil) < 1 or min(pads) < 0:
        raise InvalidInputError(
            f"{raw}: strides {strides} and dilations {dil} must be >= 1 and pads {pads} >= 0"
        )
    auto_pad = raw.attrs.get("auto_pad", "NOTSET")
    if auto_pad == "VALID":
        pads = (0, 0, 0, 0)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = _same_pads(raw, x.shape[2:], kernel, strides, dil, upper=auto_pad == "SAME_UPPER")
    elif auto_pad != "NOTSET":
        raise InvalidInputError(
            f"{raw}: auto_pad {auto_pad!r} is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER"
        )
    return {"kernel_shape": tuple(kernel), "strides": strides, "dilations": dil, "pads": pads}


def _same_pads(raw, sizes, kernel, strides, dilations, *, upper: bool) -> tuple[int, ...]:
    begin, end = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        require(raw, known(size), f"auto_pad SAME needs known spatial sizes, input has {sizes}")
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        begin.append(small if upper else large)
        end.append(large if upper else small)
    return (*begin, *end)


def _kernel(raw: RawNode, ctx: Context, weight_index: int | None) -> tuple[int, ...]:
    if "kernel_shape" in raw.attrs:
        return _ints(raw, "kernel_shape", ())
    if weight_index is None:
        raise InvalidInputError(f"{raw}: attribute kernel_shape is required")
    return tuple(int(d) for d in ctx.info(raw, weight_index).shape[2:])


def _group(raw: RawNode) -> int:
    group = int(raw.attrs.get("group", 1))
    if group < 1:
        raise InvalidInputError(f"{raw}: group {group} must be >= 1 (1 for a plain convolution)")
    return group


_CONV = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}


@normalizer("Conv")
def _conv(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, _CONV)
    attrs = spatial_attrs(raw, ctx, _kernel(raw, ctx, 1))
    attrs["group"] = _group(raw)
    return make(raw, [n for n in raw.inputs[:3] if n], attrs)


@normalizer("ConvTranspose")
def _conv_transpose(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, _CONV | {"output_padding", "output_shape"})
    kernel = _kernel(raw, ctx, 1)
    explicit = {k: v for k, v in raw.attrs.items() if k != "auto_pad"}
    attrs = spatial_attrs(RawNode(**{**raw.__dict__, "attrs": explicit}), ctx, kernel)
    attrs["group"] = _group(raw)
    attrs["output_padding"] = _ints(raw, "output_padding", (0, 0))
    auto_pad = raw.attrs.get("auto_pad", "NOTSET")
    x = ctx.info(raw)
    if "output_shape" in raw.attrs or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        wanted = _ints(raw, "output_shape", ())[-2:] or tuple(
            d * s if known(d) else d for d, s in zip(x.shape[2:], attrs["strides"], strict=True)
        )
        attrs["pads"] = _transpose_pads(raw, x.shape[2:], wanted, attrs, auto_pad)
    elif auto_pad == "VALID":
        attrs["pads"] = (0, 0, 0, 0)
    return make(raw, [n for n in raw.inputs[:3] if n], attrs)


def _transpose_pads(raw, sizes, wanted, attrs, auto_pad) -> tuple[int, ...]:
    """ONNX ConvTranspose: pads from output_shape (or SAME), ``total = s(in-1)+op+dk - out``."""
    begin, end = [], []
    for i, (size, out) in enumerate(zip(sizes, wanted, strict=True)):
        require(raw, known(size) and known(out), f"output_shape needs known sizes, got {sizes}")
        k, s, d = attrs["kernel_shape"][i], attrs["strides"][i], attrs["dilations"][i]
        total = s * (size - 1) + attrs["output_padding"][i] + (k - 1) * d + 1 - out
        require(
            raw,
            total >= 0,
            f"output_shape {wanted} is larger than the full transposed "
            "convolution; quantemu does not pad it further",
        )
        if auto_pad == "SAME_UPPER":
            begin.append(total // 2)
            end.append(total - total // 2)
        else:
            begin.append(total - total // 2)
            end.append(total // 2)
    return (*begin, *end)


@normalizer("MaxPool", "AveragePool")
def _pool(raw: RawNode, ctx: Context) -> Node:
    average = raw.op_type == "AveragePool"
    known_attrs = {"auto_pad", "ceil_mode", "kernel_shape", "pads", "strides", "dilations"}
    known_attrs |= {"count_include_pad"} if average else {"storage_order"}
    check_attrs(raw, known_attrs)
    require(
        raw,
        int(raw.attrs.get("storage_order", 0)) == 0,
        "storage_order=1 (column-major indices) is not supported; only the pooled values are",
    )
    single_output(raw, ctx, "Indices")
    attrs = spatial_attrs(raw, ctx, _kernel(raw, ctx, None))
    attrs["ceil_mode"] = int(raw.attrs.get("ceil_mode", 0))
    if average:
        attrs["count_include_pad"] = int(raw.attrs.get("count_include_pad", 0))
    return make(raw, raw.inputs[:1], attrs)


# -- element-wise ---------------------------------------------------------------------------


@normalizer(
    "Relu",
    "Sigmoid",
    "Tanh",
    "HardSwish",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "PRelu",
    "MatMul",
    "Identity",
    "GlobalAveragePool",
    "GlobalMaxPool",
)
def _plain(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, ())
    return make(raw, raw.inputs, {})


@normalizer("LeakyRelu")
def _leaky_relu(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, {"alpha"})
    return make(raw, raw.inputs[:1], {"alpha": float(raw.attrs.get("alpha", 0.01))})


@normalizer("HardSigmoid")
def _hard_sigmoid(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, {"alpha", "beta"})
    attrs = {"alpha": float(raw.attrs.get("alpha", 0.2)), "beta": float(raw.attrs.get("beta", 0.5))}
    return make(raw, raw.inputs[:1], attrs)


@normalizer("Clip")
def _clip(raw: RawNode, ctx: Context) -> Node:
    if ctx.opset < 11:
        check_attrs(raw, {"min", "max"})
        low, high = raw.attrs.get("min", -math.inf), raw.attrs.get("max", math.inf)
    else:
        check_attrs(raw, ())
        low_array, high_array = ctx.const(raw, 1, "min"), ctx.const(raw, 2, "max")
        low = -math.inf if low_array is None else _scalar(raw, low_array, "min")
        high = math.inf if high_array is None else _scalar(raw, high_array, "max")
    return make(raw, raw.inputs[:1], {"min": float(low), "max": float(high)})


def _scalar(raw: RawNode, value: np.ndarray, role: str) -> float:
    if value.size != 1:
        raise InvalidInputError(f"{raw}: {role} must be a scalar, got shape {value.shape}")
    return float(value.reshape(()))


@normalizer("Gemm")
def _gemm(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, {"alpha", "beta", "transA", "transB"})
    attrs = {
        "alpha": float(raw.attrs.get("alpha", 1.0)),
        "beta": float(raw.attrs.get("beta", 1.0)),
        "transA": int(raw.attrs.get("transA", 0)),
        "transB": int(raw.attrs.get("transB", 0)),
    }
    return make(raw, [n for n in raw.inputs[:3] if n], attrs)


@normalizer("BatchNormalization")
def _batchnorm(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, {"epsilon", "momentum", "training_mode"})
    require(
        raw,
        int(raw.attrs.get("training_mode", 0)) == 0,
        "training_mode=1 is not supported;"
        " quantemu imports inference graphs (export the model in eval mode)",
    )
    single_output(raw, ctx, "running statistics")
    return make(raw, raw.inputs[:5], {"epsilon": float(raw.attrs.get("epsilon", 1e-5))})


@normalizer("LRN")
def _lrn(raw: RawNode, ctx: Context) -> Node:
    check_attrs(raw, {"alpha", "beta", "bias", "size"})
    if "size" not in raw.attrs:
        raise InvalidInputError(f"{raw}: attribute size is required")
    attrs = {
        "size": int(raw.attrs["size"]),
        "alpha": float(raw.attrs.get("alpha", 1e-4)),
        "beta": float(raw.attrs.get("beta", 0.75)),
        "bias": float(raw.attrs.get("bias", 1.0)),
    }
    return make(raw, raw.inputs[:1], attrs)
